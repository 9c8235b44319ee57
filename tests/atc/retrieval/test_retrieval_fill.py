"""The background filler (atc/retrieval/fill.py) and what ``atc tools import`` says about it: real
``atc`` commands and filler processes over a store of 90 StableToolBench APIs (more than an import
completes itself, fill.INLINE) and of RestBench TMDB (54 tools: fewer), the local model on numpy
(``ATC_EMBED_RUNTIME=numpy``: exact vectors, no onnxruntime model to prepare)."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from atc.retrieval.embedders import LocalMiniLM
from atc.retrieval.exact import mean_of_views
from atc.retrieval.fill import fill
from atc.retrieval.index import index_dir, open_index
from atc.retrieval.weights import local_available
from protocols.store import Store

pytestmark = pytest.mark.skipif(not local_available(), reason="atc[embed] is not installed")
ROOT = Path(__file__).resolve().parents[3]
ATC = Path(sys.executable).with_name("atc")


def _atc(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ATC), *args], capture_output=True, text=True, timeout=300, env={**os.environ, **env})


def _flags(home: Path) -> np.ndarray:
    live = (index_dir(home) / "CURRENT").read_text().strip()
    return np.fromfile(index_dir(home) / live / "exact.u8", dtype=np.uint8)


def _wait(predicate: object, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError("timed out")


def _check_rows(home: Path, model: LocalMiniLM) -> int:
    """Every row marked present holds the mean of its views' vectors; how many are."""
    index = open_index(home, store=Store(home), embedder=model, refresh=False)
    stages = index.stages(model)
    assert stages is not None
    vectors, flags = stages.exact._maps()
    present = [r for r in range(stages.rows) if flags[r]]
    if present:
        views = [index.doc(stages.doc(r)).views for r in present]
        expected = mean_of_views(model.embed_documents([t for v in views for t in v]), [len(v) for v in views])
        assert np.allclose(np.asarray(vectors[present]), expected, atol=1e-5)
    return len(present)


POOL = 90


@pytest.fixture()
def pool(bench_data: Path, tmp_path: Path) -> Path:
    """A ToolBench query file of ``POOL`` distinct APIs."""
    from atc.retrieval.fill import INLINE

    assert POOL > INLINE
    source = bench_data / "toolbench" / "stabletoolbench" / "solvable_queries" / "test_instruction"
    apis: dict[tuple[str, str], Any] = {}
    for path in sorted(source.glob("*.json")):
        for q in json.loads(path.read_text()):
            for api in q["api_list"]:
                apis.setdefault((api["tool_name"], api["api_name"]), api)
    spec = tmp_path / "pool.json"
    spec.write_text(json.dumps([{"api_list": list(apis.values())[:POOL]}]))
    return spec


@pytest.fixture()
def env(tmp_path: Path) -> dict[str, str]:
    return {"ATC_HOME": str(tmp_path / "home"), "ATC_EMBED_RUNTIME": "numpy", "OPENBLAS_NUM_THREADS": "1"}


def test_an_import_embeds_the_full_vectors_in_the_background(pool: Path, env: dict[str, str]) -> None:
    proc = _atc("tools", "import", str(pool), "--name", "pool", "--json", env={**env, "ATC_EMBED_BACKGROUND": "auto"})
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    home = Path(env["ATC_HOME"])
    rows = len(_flags(home))
    assert rows > 64 and doc["embedded"]["tools"] == POOL and doc["embedded"]["background"] == rows
    assert doc["embedded"]["runtime"] == "static first stage"
    # off a terminal the background is not announced on stderr (it could be read after the next
    # command began); the JSON says it, with the filler's pid
    assert "background" not in proc.stderr, proc.stderr
    pid = doc["embedded"]["pid"]
    assert isinstance(pid, int)
    _wait(lambda: bool(_flags(home).all()))
    _wait(lambda: not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text())
    assert _check_rows(home, LocalMiniLM("numpy")) == rows
    # A search now computes nothing: every vector is there.
    search = _atc("tools", "search", "the weather of a city", "--json", env=env)
    assert json.loads(search.stdout)["retriever"] == "hybrid"
    assert _flags(home).all()


def test_without_the_background_a_search_embeds_what_it_short_lists(pool: Path, env: dict[str, str]) -> None:
    from atc.retrieval.hybrid import SHORT_LIST

    proc = _atc("tools", "import", str(pool), "--name", "pool", env={**env, "ATC_EMBED_BACKGROUND": "off"})
    assert proc.returncode == 0 and "background" not in proc.stderr, proc.stderr
    home = Path(env["ATC_HOME"])
    assert not _flags(home).any()
    search = _atc("tools", "search", "the weather of a city", "--json", env=env)
    assert search.returncode == 0 and json.loads(search.stdout)["retriever"] == "hybrid"
    assert int(_flags(home).sum()) == SHORT_LIST  # the short list, and nothing else
    assert _check_rows(home, LocalMiniLM("numpy")) == SHORT_LIST


def test_a_small_import_computes_its_full_vectors_itself(bench_data: Path, env: dict[str, str]) -> None:
    """54 tools: no process is left behind, and the first search computes nothing."""
    spec = bench_data / "restbench" / "specs" / "tmdb_oas.json"
    proc = _atc("tools", "import", str(spec), "--name", "tmdb", "--json", env={**env, "ATC_EMBED_BACKGROUND": "auto"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["embedded"]["background"] == 0 and "background" not in proc.stderr
    # off a terminal, a wait of over a second is said, counted in tools (not in their texts)
    assert "atc: embedded 54 tools in" in proc.stderr, proc.stderr
    home = Path(env["ATC_HOME"])
    assert _flags(home).all() and _check_rows(home, LocalMiniLM("numpy")) == 54
    assert not (index_dir(home) / "fill.log").exists()  # no filler was started


def test_one_filler_per_store_and_a_killed_one_loses_nothing(pool: Path, env: dict[str, str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    assert _atc("tools", "import", str(pool), "--name", "pool", env=env).returncode == 0  # background off
    home = Path(env["ATC_HOME"])
    rows = len(_flags(home))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with open(index_dir(home) / ".fill.lock", "a+b") as lock:  # another filler is at work
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        assert fill(home, nice=0) == 0
        fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    code = "import sys, atc.retrieval.fill as f; f.BATCH = 4; f.main([sys.argv[1]])"
    proc = subprocess.Popen([sys.executable, "-c", code, str(home)], env={**os.environ, **env}, cwd=ROOT)
    try:
        _wait(lambda: int(_flags(home).sum()) >= 8 or proc.poll() is not None)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    model = LocalMiniLM("numpy")
    kept = _check_rows(home, model)  # what it marked is there, and right
    assert kept >= 8
    assert fill(home, nice=0) == rows - kept
    assert _check_rows(home, model) == rows


def test_a_store_that_cannot_take_a_filler_is_only_slower(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No folder for the filler's log (here the index's place is a file): no process, no error;
    searches compute the vectors they need."""
    from atc.retrieval.fill import spawn

    monkeypatch.setenv("ATC_EMBED_BACKGROUND", "auto")
    home = tmp_path / "home"
    home.mkdir()
    index_dir(home).write_text("not a folder")
    assert spawn(home) is None
    monkeypatch.setenv("ATC_EMBED_BACKGROUND", "off")
    assert spawn(tmp_path / "other") is None and not (tmp_path / "other").exists()
