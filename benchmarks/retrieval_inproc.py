"""In-process query latency of one source tree (run as a child process by retrieval_speed.py).

``python retrieval_inproc.py TREE HOME QUERIES.json [--resident]`` imports ``atc`` from ``TREE``
(the editable install's finder is removed first, so that the code before a change and after it
run in the same interpreter with the same packages), opens the index of the store in ``HOME``
and prints JSON: per query, the hybrid's whole search, the request's embedding alone, and the
ranking alone (the same search with the request's vectors computed beforehand), in ms.
``--resident``: the embedder is told that the process is the search server (``keep_resident``:
requests stay on numpy, its weights copied contiguous); without it, the process is a program
that searches again and again (requests on onnxruntime fp32 from the third, when installed).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any


def use_tree(tree: str) -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not type(f).__name__.startswith("_Editable")]
    sys.path.insert(0, tree)


class Precomputed:
    """The embedder with the requests' vectors computed before the timed searches (the static
    first stage, when the embedder has one, is kept: it is part of the ranking)."""

    def __init__(self, inner: Any, texts: list[str]) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.table = {t: inner.embed([t])[0] for t in texts}
        static = getattr(inner, "static", None)
        if static is not None:
            self.static = static

    def embed(self, texts: Any) -> Any:
        import numpy as np

        return np.vstack([self.table[t] for t in texts])

    def embed_documents(self, texts: Any) -> Any:
        return getattr(self.inner, "embed_documents", self.inner.embed)(texts)


def main() -> int:
    tree, home, queries_path = sys.argv[1:4]
    resident = "--resident" in sys.argv
    use_tree(tree)
    from atc.retrieval.api import make_retriever
    from atc.retrieval.embedders import make_embedder
    from atc.retrieval.hybrid import sentences
    from atc.retrieval.index import open_index
    from protocols.store import Store

    queries: list[str] = json.loads(Path(queries_path).read_text())
    embedder = make_embedder()
    if resident and hasattr(embedder, "keep_resident"):
        embedder.keep_resident()
    index = open_index(Path(home), store=Store(Path(home)), embedder=embedder)
    hybrid = make_retriever("hybrid", index, embedder=embedder)
    for q in queries[:3]:  # opened and paged in; with ATC_EMBED_RUNTIME=auto, requests moved to
        hybrid.search(q, 5)  # onnxruntime fp32 from a process's third (embedders.FAST_AFTER)
    out: dict[str, list[float]] = {"search": [], "embed": [], "ranking": []}
    for q in queries:
        t0 = time.perf_counter()
        hybrid.search(q, 5)
        out["search"].append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        embedder.embed(sentences(q) or [q])
        out["embed"].append((time.perf_counter() - t0) * 1000)
    fixed = Precomputed(embedder, sorted({t for q in queries for t in (sentences(q) or [q])}))
    ranking = make_retriever("hybrid", index, embedder=fixed)
    ranking.search(queries[0], 5)
    for q in queries:
        t0 = time.perf_counter()
        ranking.search(q, 5)
        out["ranking"].append((time.perf_counter() - t0) * 1000)
    runtime = getattr(embedder, "requests_runtime", "numpy")
    print(json.dumps({"times": out, "requests": runtime}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
