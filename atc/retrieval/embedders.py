"""Embedders (text -> unit vectors) and the on-disk cache that computes each vector once.

Three choices, from ``ATC_EMBED_MODEL`` (see ``atc.config.EmbedSettings``):

* a model behind any OpenAI-compatible ``/v1/embeddings`` endpoint (:class:`RemoteEmbedder`),
* the local all-MiniLM-L6-v2 in numpy (:class:`atc.retrieval.minilm.MiniLM`, ``atc[embed]``),
* none: the retrievers fall back to BM25 alone, which works everywhere.

Vectors are cached in ``ATC_HOME/embeddings/<embedder>.vec`` (vectorstore.py: append-only),
keyed by a hash of the text and kept apart per embedder name, so that an unchanged tool is never embedded twice, whether it sits
in the store's index or in a spec file given with ``--tools``.
"""

from __future__ import annotations

try:  # the C module: hashlib's import loads OpenSSL too (about 4 ms of a command's start)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter without it
    from hashlib import blake2b

import functools
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atc.config import EmbedSettings, embed_runtime, embed_settings, models_dir
from atc.errors import ConfigError, ModelError
from atc.retrieval import onnx_minilm
from atc.retrieval.base import Embedder
from atc.retrieval.vectorstore import HASH_BYTES, VectorCache
from atc.retrieval.weights import INSTALL_HINT, local_available

if TYPE_CHECKING:
    import numpy as np

    from atc.retrieval.doc import Doc

__all__ = ["RemoteEmbedder", "VectorCache", "make_embedder", "text_hash", "embed_cached", "doc_vectors"]

_NONE = {"none", "off", "no", "bm25", "0", "false"}
_LOCAL = {"local", "minilm", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}


def text_hash(text: str) -> bytes:
    """16 bytes that identify a text (the cache key of its vector)."""
    return blake2b(text.encode("utf-8"), digest_size=HASH_BYTES).digest()


def make_embedder(settings: EmbedSettings | None = None, *, required: bool = False) -> Embedder | None:
    """The configured embedder, or None when there is none (``ATC_EMBED_MODEL=none``, or automatic
    and ``atc[embed]`` missing). ``required``: a missing one is a ``ConfigError`` instead."""
    settings = settings or embed_settings()
    model = settings.model
    if model is not None and model.lower() in _NONE:
        if required:
            raise ConfigError("this retriever needs embeddings, and ATC_EMBED_MODEL=none",
                              hint="set ATC_EMBED_MODEL (local, or a model of an OpenAI-compatible server)")
        return None
    if model is None or model.lower() in _LOCAL:
        if not local_available():
            if model is None and not required:
                return None
            raise ConfigError("the local embedding model (all-MiniLM-L6-v2) is not installed", hint=INSTALL_HINT)
        return _local_model()
    if model.lower().startswith("st:"):
        return SentenceTransformerEmbedder(model[3:])
    if not settings.base_url:
        raise ConfigError(f"ATC_EMBED_MODEL={model} names a remote model, but no server is configured",
                          hint="set ATC_EMBED_BASE_URL (or OPENAI_BASE_URL) to an OpenAI-compatible /v1 URL")
    return RemoteEmbedder(model, settings.base_url, settings.api_key, batch_size=settings.batch_size,
                          timeout=settings.timeout)


def _local_model() -> Embedder:
    return _local_model_for(embed_runtime(), str(models_dir()))


@functools.lru_cache(maxsize=4)
def _local_model_for(runtime: str, models: str) -> Embedder:
    """The local model, made once per process and runtime: it holds nothing but its weights, and
    a program that searches many times (``atc.search`` in a loop, ``solve_many``) should not map
    the weights again for each query."""
    return LocalMiniLM(runtime, Path(models))


#: requests a process embeds on numpy before ``auto`` moves them to onnxruntime fp32
FAST_AFTER = 2
#: onnxruntime's threads for one request (measured: benchmarks/RESULTS.md, issue #25)
REQUEST_THREADS = 1

#: ``ATC_EMBED_RUNTIME`` values: what embeds requests, and what embeds tool texts
RUNTIMES = {"auto": ("numpy", "int8"), "numpy": ("numpy", "numpy"), "onnx": ("fp32", "fp32"),
            "onnx-int8": ("int8", "int8")}


class LocalMiniLM:
    """all-MiniLM-L6-v2 on this machine, each text on the runtime that suits it (an ``Embedder``).

    Requests (``embed``) are few short texts, and exactness matters most there: the numpy model
    (tokenised in plain Python, so a one-query process loads no tokenizer library) is exact and,
    for one request, as fast as onnxruntime's fp32. Tool texts (``embed_documents``) come in
    thousands: onnxruntime's int8 model embeds them about twice as fast, and its vectors rank
    within 0.003 nDCG@5 of the exact ones (benchmarks/RESULTS.md). Without onnxruntime, or when its
    model cannot be prepared, numpy embeds everything (``documents_runtime`` says which ran, and
    ``fallback`` why). Every runtime gives vectors of the one model: they share the name, the
    vector cache and the index."""

    name = "all-MiniLM-L6-v2"
    dim = 384

    def __init__(self, runtime: str = "auto", models: Path | None = None) -> None:
        if runtime not in RUNTIMES:
            raise ConfigError(f"ATC_EMBED_RUNTIME={runtime!r} is not a runtime of the local model",
                              hint=f"use one of: {', '.join(RUNTIMES)}")
        self.runtime = runtime
        self.models = Path(models) if models is not None else models_dir()
        self.fallback: str | None = None
        self._models: dict[str, Embedder] = {}
        self._static: Embedder | None = None
        self._pinned = False  # keep_resident: requests stay on numpy
        self._requests_seen = 0
        self._resident_kind: str | None = None

    def _model(self, kind: str) -> Embedder:
        found = self._models.get(kind)
        if found is not None:
            return found
        if kind == "numpy":
            # lazy: minilm imports numpy (about 60 ms): paid only by a process that embeds with it
            from atc.retrieval.minilm import MiniLM

            made: Embedder = MiniLM()
        else:
            made = self._onnx(kind)
        self._models[kind] = made
        return made

    def _onnx(self, precision: str) -> Embedder:
        if self.runtime == "auto":  # the fast path when it can be had, else numpy, and why
            if not onnx_minilm.onnx_available():
                self.fallback = "onnxruntime is not installed"
                return self._model("numpy")
            try:
                return onnx_minilm.OnnxMiniLM(self.models, precision)
            except Exception as exc:  # a model that cannot be written or loaded: numpy still works
                self.fallback = f"the onnxruntime model could not be prepared: {exc}"[:300]
                return self._model("numpy")
        return onnx_minilm.OnnxMiniLM(self.models, precision)

    def documents_ready(self) -> bool:
        """Whether tool texts can be embedded without first writing the onnxruntime model (done
        once per models folder, a few seconds: the import command says so before it starts)."""
        precision = RUNTIMES[self.runtime][1]
        if precision == "numpy" or precision in self._models:
            return True
        return not onnx_minilm.onnx_available() or onnx_minilm.model_path(self.models, precision).is_file()

    def prepare_documents(self) -> None:
        """Load (and the first time, write) the model that embeds tool texts."""
        self._model(RUNTIMES[self.runtime][1])

    @property
    def documents_runtime(self) -> str:
        """What embeds tool texts: ``numpy``, ``onnxruntime fp32`` or ``onnxruntime int8``."""
        model = self._model(RUNTIMES[self.runtime][1])
        precision = getattr(model, "precision", None)
        return f"onnxruntime {precision}" if precision else "numpy"

    @property
    def static(self) -> Embedder:
        """The static first stage of this model (static.py): a first ranking of every tool."""
        if self._static is None:
            # lazy: static imports numpy (about 60 ms): paid only by a process that ranks with the model
            from atc.retrieval.static import StaticEmbedder

            self._static = StaticEmbedder(models=self.models)
        return self._static

    def keep_resident(self) -> None:
        """For the search server: requests stay on numpy, with contiguous copies of its weights.
        onnxruntime fp32 would embed a request about twice as fast, but costs the server about
        47 MB more (measured: 242 MB against 195 MB at 17,353 tools), and the server's memory is
        held to what it was before the two stages (benchmarks/RESULTS.md, issue #25)."""
        self._pinned = True
        model = self._model(RUNTIMES[self.runtime][0])
        resident = getattr(model, "keep_resident", None)
        if callable(resident):
            resident()

    def _requests(self) -> str:
        """What embeds requests: the runtime's choice; with ``auto``, from the ``FAST_AFTER``-th
        request of a process on (a program that searches again and again), onnxruntime fp32 when
        it can run: the numpy model's vectors to 3e-7, so the same rankings, in about half the
        time; a process that embeds one request does not pay the 0.1-0.2 s of loading it."""
        kind = RUNTIMES[self.runtime][0]
        if self.runtime != "auto" or self._pinned or self._requests_seen < FAST_AFTER:
            return kind
        if self._resident_kind is None:
            self._resident_kind = "numpy"
            if onnx_minilm.onnx_available():
                try:
                    if "fp32" not in self._models:
                        self._models["fp32"] = onnx_minilm.OnnxMiniLM(self.models, "fp32", threads=REQUEST_THREADS)
                    self._resident_kind = "fp32"
                except Exception:  # a model that cannot be written or loaded: numpy still works
                    pass
        return self._resident_kind

    @property
    def requests_runtime(self) -> str:
        """What embeds requests now: ``numpy`` or ``onnxruntime fp32`` (or ``int8``)."""
        kind = self._requests()
        return "numpy" if kind == "numpy" else f"onnxruntime {kind}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of requests (exact by default)."""
        model = self._model(self._requests())
        self._requests_seen += 1
        return model.embed(texts)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of tool texts (fast by default)."""
        return self._model(RUNTIMES[self.runtime][1]).embed(texts)


class RemoteEmbedder:
    """Embeddings from ``POST {base_url}/embeddings`` (the OpenAI API), ``batch_size`` texts a request."""

    def __init__(self, model: str, base_url: str, api_key: str | None = None, *, batch_size: int = 64,
                 timeout: float = 60.0) -> None:
        self.model = model
        self.name = f"openai:{model}"
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.batch_size = max(1, batch_size)
        self.timeout = timeout
        self.requests = 0
        self._dim = 0

    @property
    def dim(self) -> int:
        if not self._dim:
            self.embed(["dimension"])
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        # numpy: 60-120 ms to import, and a BM25-only search never needs it
        import numpy as np

        rows: list[np.ndarray] = []
        for start in range(0, len(texts), self.batch_size):
            rows.append(self._batch(list(texts[start:start + self.batch_size])))
        if not rows:
            return np.zeros((0, self._dim or 1), dtype=np.float32)
        return np.vstack(rows)

    def _batch(self, texts: list[str]) -> np.ndarray:
        # httpx and numpy: about 100 ms each to import; only a remote embedding request needs them
        import httpx
        import numpy as np

        url = f"{self.base_url}/embeddings"
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        self.requests += 1
        try:
            with httpx.Client(trust_env=False, timeout=self.timeout) as client:
                response = client.post(url, json={"model": self.model, "input": texts}, headers=headers)
        except httpx.HTTPError as exc:
            raise ModelError(f"the embeddings server at {self.base_url} cannot be reached: {exc}",
                             hint="check ATC_EMBED_BASE_URL, or set ATC_EMBED_MODEL=none for BM25 only") from exc
        if response.status_code >= 400:
            raise ModelError(f"the embeddings server answered HTTP {response.status_code}: {response.text[:300]}",
                             hint="check ATC_EMBED_MODEL and the API key")
        try:
            data: Any = response.json()["data"]
            ordered = sorted(data, key=lambda d: int(d.get("index", 0)))
            matrix = np.asarray([d["embedding"] for d in ordered], dtype=np.float32)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ModelError(f"the embeddings server's answer is not an embeddings list: {response.text[:200]!r}",
                             hint="the endpoint must speak the OpenAI /v1/embeddings API") from exc
        if matrix.ndim != 2 or matrix.shape[0] != len(texts) or matrix.shape[1] == 0:
            raise ModelError(f"the embeddings server returned {matrix.shape[0] if matrix.ndim else 0} vectors "
                             f"for {len(texts)} texts")
        if self._dim and matrix.shape[1] != self._dim:
            raise ModelError(f"the embeddings server changed the vector length from {self._dim} to {matrix.shape[1]}")
        self._dim = int(matrix.shape[1])
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return np.asarray(matrix / np.maximum(norms, 1e-12), dtype=np.float32)


class SentenceTransformerEmbedder:
    """Any sentence-transformers model (``ATC_EMBED_MODEL=st:NAME``), when that package is installed."""

    def __init__(self, model: str) -> None:
        try:
            # sentence-transformers (torch): optional, seconds to import; only when chosen
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ConfigError("ATC_EMBED_MODEL=st:... needs the sentence-transformers package",
                              hint="pip install sentence-transformers") from exc
        self.name = f"st:{model}"
        self._model = SentenceTransformer(model)
        self.dim = int(self._model.get_sentence_embedding_dimension() or 0)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        # numpy: 60-120 ms to import, and a BM25-only search never needs it
        import numpy as np

        out = self._model.encode(list(texts), normalize_embeddings=True, convert_to_numpy=True)
        return np.asarray(out, dtype=np.float32)


#: Texts embedded per step of a long embedding (progress is reported, and work kept, per step).
EMBED_STEP = 512
#: Texts of the first step: the rate seen there says early whether the wait will be long.
EMBED_FIRST = 64
#: Seconds of embedding between two writes of the cache: an interrupted import keeps its vectors.
#: Every step (appending costs what it adds: vectorstore.py).
SAVE_EVERY = 0.0

Progress = Callable[[int, int], None]


def embed_cached(embedder: Embedder, texts: Sequence[str], cache: VectorCache | None, *,
                 progress: Progress | None = None) -> np.ndarray:
    """Vectors of ``texts``: from the cache when there, the rest computed (each distinct text
    once) in steps of ``EMBED_STEP`` texts (the first one smaller), with ``progress(0, total)``
    before the first and ``progress(done, total)`` after each step, and
    the cache written every ``SAVE_EVERY`` seconds and at the end, so that an interrupted run
    (minutes for a large collection with the local model) keeps what it computed."""
    # numpy: 60-120 ms to import, and a BM25-only search never needs it
    import numpy as np

    embed = getattr(embedder, "embed_documents", None) or embedder.embed
    if cache is None:
        return np.asarray(embed(texts), dtype=np.float32)
    hashes = [text_hash(t) for t in texts]
    found = cache.get(hashes)
    missing: dict[bytes, str] = {}
    for h, t, v in zip(hashes, texts, found, strict=True):
        if v is None:
            missing.setdefault(h, t)
    fresh: dict[bytes, np.ndarray] = {}
    pending = list(missing.items())
    saved, last_save = 0, time.monotonic()
    if progress is not None and pending:
        progress(0, len(pending))  # the start: a reporter times the steps from here
    start = 0
    while start < len(pending):
        # A small first step tells a reporter the rate early (whether to announce a long wait).
        end = min(len(pending), start + (min(EMBED_FIRST, EMBED_STEP) if start == 0 else EMBED_STEP))
        step = pending[start:end]
        computed = np.asarray(embed([t for _, t in step]), dtype=np.float32)
        fresh.update(zip([h for h, _ in step], computed, strict=True))
        if progress is not None:
            progress(end, len(pending))
        if time.monotonic() - last_save > SAVE_EVERY and end < len(pending):
            keys = [h for h, _ in pending[saved:end]]
            cache.put(keys, np.vstack([fresh[k] for k in keys]))
            saved, last_save = end, time.monotonic()
        start = end
    dims = {len(v) for v in found if v is not None} | {len(v) for v in fresh.values()}
    if len(dims) > 1:  # the cache holds vectors of another length under this name: recompute all
        unique = dict(zip(hashes, texts, strict=True))
        computed = np.asarray(embed(list(unique.values())), dtype=np.float32)
        fresh = dict(zip(unique, computed, strict=True))
        pending, saved = list(unique.items()), 0  # every vector is new: all of them get saved
        found = [None] * len(texts)
        dims = {computed.shape[1]}
    dim = dims.pop() if dims else int(getattr(embedder, "dim", 0) or 1)
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for i, (h, v) in enumerate(zip(hashes, found, strict=True)):
        out[i] = fresh[h] if v is None else v
    unsaved = [h for h, _ in pending[saved:]] if pending else list(fresh)
    if unsaved:
        cache.put(unsaved, np.vstack([fresh[k] for k in unsaved]))
    return out


def doc_vectors(embedder: Embedder, docs: Sequence[Doc], cache: VectorCache | None, *,
                progress: Progress | None = None) -> np.ndarray:
    """Each document's vector: the mean of the unit vectors of its views (``Doc.views``). A
    similarity to it is the mean of the query's similarities to the views, which ranks a tool
    whose name, or whose description, matches the request strongly above one that matches both
    weakly. Every distinct text is embedded (and cached) once. ``progress(done, total)`` counts
    tools: those with a text to embed."""
    # numpy: 60-120 ms to import, and a BM25-only search never needs it
    import numpy as np

    texts = [t for d in docs for t in d.views]
    if not texts:
        return np.zeros((0, int(getattr(embedder, "dim", 0) or 1)), dtype=np.float32)
    report = progress
    if progress is not None and cache is not None:
        found = cache.get([text_hash(t) for t in texts])
        missing = {t for t, v in zip(texts, found, strict=True) if v is None}
        tools = sum(1 for d in docs if any(t in missing for t in d.views))

        def report(done: int, total: int) -> None:
            progress(round(done * tools / total) if total else tools, tools)

    vectors = embed_cached(embedder, texts, cache, progress=report)
    counts = np.array([len(d.views) for d in docs], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return np.asarray(np.add.reduceat(vectors, starts, axis=0) / counts[:, None], dtype=np.float32)
