"""Settings, and the one place environment variables are read.

Precedence everywhere: an explicit argument > configuration > environment > default.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

__all__ = ["atc_home", "ModelSettings", "model_settings", "EmbedSettings", "embed_settings", "embed_runtime", "models_dir",
           "mcp_start_timeout", "trace_exporter", "ray_address", "search_server_mode", "search_server_idle", "temp_dir",
           "serve_token", "JudgeSettings", "judge_settings", "bench_data"]


def atc_home(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The store directory: ``explicit``, else ``$ATC_HOME``, else ``~/.atc``."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("ATC_HOME")
    return Path(env).expanduser() if env else Path.home() / ".atc"


class ModelSettings(NamedTuple):
    """How to reach the model, after the OpenAI client's conventions. (Settings are named tuples,
    immutable like frozen dataclasses: every command reads them, and ``dataclasses`` costs a
    command's start about 17 ms for its import of ``inspect``.)"""

    model: str | None
    api_key: str | None
    base_url: str | None
    temperature: float = 0.0
    timeout: float = 120.0
    max_retries: int = 3
    #: ``http`` (atc's own lean client, the default: no second of ``openai`` import) or ``openai``
    #: (the ``openai`` package), from ``ATC_MODEL_CLIENT``.
    client: str = "http"

    def __repr__(self) -> str:  # the key never reaches a log or a traceback
        return (f"ModelSettings(model={self.model!r}, base_url={self.base_url!r}, "
                f"api_key={'***' if self.api_key else None}, client={self.client!r})")


def model_settings(model: str | None = None, *, temperature: float | None = None) -> ModelSettings:
    return ModelSettings(
        model=model or os.environ.get("ATC_MODEL") or None,
        api_key=os.environ.get("OPENAI_API_KEY") or None,
        base_url=os.environ.get("OPENAI_BASE_URL") or None,
        temperature=0.0 if temperature is None else temperature,
        client=(os.environ.get("ATC_MODEL_CLIENT") or "http").strip().lower(),
    )


class JudgeSettings(NamedTuple):
    """The judge model of ``atc eval``: its name (None: no judge) and server (None: the solving
    model's, ``OPENAI_BASE_URL``)."""

    model: str | None
    base_url: str | None


def judge_settings(model: str | None = None) -> JudgeSettings:
    """``model``, else ``$ATC_JUDGE_MODEL``; the server from ``$ATC_JUDGE_BASE_URL``."""
    return JudgeSettings(model=model or os.environ.get("ATC_JUDGE_MODEL") or None,
                         base_url=os.environ.get("ATC_JUDGE_BASE_URL") or None)


def bench_data() -> Path | None:
    """``$ATC_BENCH_DATA``: the folder holding public benchmark data, read by ``atc eval FORMAT``
    when no path is given."""
    value = os.environ.get("ATC_BENCH_DATA")
    return Path(value).expanduser() if value else None


def mcp_start_timeout(explicit: float | None = None) -> float:
    """Seconds an MCP server gets to start and answer the handshake: ``explicit``, else
    ``$ATC_MCP_START_TIMEOUT``, else 30."""
    if explicit is not None:
        return explicit
    try:
        value = float(os.environ.get("ATC_MCP_START_TIMEOUT") or 30.0)
    except ValueError:
        return 30.0
    return value if value > 0 else 30.0


def trace_exporter() -> str | None:
    """``ATC_TRACE``: where the command line sends OpenTelemetry spans (``console``: stderr,
    ``otlp``: the OTLP exporter, configured by the standard ``OTEL_EXPORTER_OTLP_*`` variables).
    None: the command line sets up no tracing (a library caller configures its own provider)."""
    value = (os.environ.get("ATC_TRACE") or "").strip().lower()
    return value or None


def search_server_mode() -> str:
    """``ATC_SEARCH_SERVER``: ``auto`` (default: the first hybrid search of a store leaves a warm
    search server behind, later searches ask it; atc/retrieval/server.py) or ``off`` (never)."""
    value = (os.environ.get("ATC_SEARCH_SERVER") or "auto").strip().lower()
    return "off" if value in {"off", "0", "no", "false", "none"} else "auto"


def temp_dir() -> Path:
    """``TMPDIR``, else ``/tmp`` (where a search server's socket folder goes; tempfile's own
    search costs a command's start an import it does not otherwise need)."""
    return Path(os.environ.get("TMPDIR") or "/tmp")


def search_server_idle() -> float:
    """``ATC_SEARCH_SERVER_IDLE``: seconds without a query after which a search server ends (600)."""
    try:
        value = float(os.environ.get("ATC_SEARCH_SERVER_IDLE") or 600.0)
    except ValueError:
        return 600.0
    return value if value > 0 else 600.0


def serve_token(var: str = "ATC_SERVE_TOKEN") -> str | None:
    """The bearer token ``atc serve --transport http`` requires, from the variable ``--token-env``
    names (default ``ATC_SERVE_TOKEN``); None when unset or empty."""
    return os.environ.get(var) or None


def ray_address() -> str | None:
    """``RAY_ADDRESS``: the Ray cluster of ``--executor ray`` (unset: a local one is started)."""
    return os.environ.get("RAY_ADDRESS") or None
class EmbedSettings(NamedTuple):
    """Which embedder the retrievers use (``ATC_EMBED_MODEL``) and how to reach a remote one.

    ``model``: None (automatic: the local all-MiniLM-L6-v2 when ``atc[embed]`` is installed, else
    none), ``"none"`` (BM25 only), ``"local"`` (the local model, an error when missing), or the
    name of a model served at an OpenAI-compatible ``/v1/embeddings`` endpoint: ``base_url`` from
    ``ATC_EMBED_BASE_URL``, else ``OPENAI_BASE_URL``; ``api_key`` from ``ATC_EMBED_API_KEY``, else
    ``OPENAI_API_KEY``."""

    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    batch_size: int = 64
    timeout: float = 60.0

    def __repr__(self) -> str:
        return (f"EmbedSettings(model={self.model!r}, base_url={self.base_url!r}, "
                f"api_key={'***' if self.api_key else None})")


def embed_runtime() -> str:
    """``ATC_EMBED_RUNTIME``: how the local model runs (``auto``: requests exactly in numpy, tool
    texts on onnxruntime int8 when installed; ``numpy``; ``onnx``; ``onnx-int8``)."""
    return (os.environ.get("ATC_EMBED_RUNTIME") or "auto").strip().lower() or "auto"


def models_dir(home: Path | None = None) -> Path:
    """``ATC_MODELS_DIR``, else ``ATC_HOME/models``: model files made from installed weights
    (the onnxruntime graph of the local embedder), made once and shared by every store that
    names the same folder."""
    value = os.environ.get("ATC_MODELS_DIR")
    return Path(value).expanduser() if value else (home if home is not None else atc_home()) / "models"


def embed_settings(model: str | None = None) -> EmbedSettings:
    env = os.environ
    return EmbedSettings(
        model=(model or env.get("ATC_EMBED_MODEL") or "").strip() or None,
        base_url=env.get("ATC_EMBED_BASE_URL") or env.get("OPENAI_BASE_URL") or None,
        api_key=env.get("ATC_EMBED_API_KEY") or env.get("OPENAI_API_KEY") or None,
    )
