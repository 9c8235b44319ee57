"""Test-wide rules.

- Every test gets an empty ``ATC_HOME`` and no ``ATC_*`` / ``OPENAI_*`` variables from the caller,
  except ``ATC_MODELS_DIR``: one folder for the whole session, so that the onnxruntime model the
  local embedder writes on first use (a few seconds) is written once, not once per test.
- Under ``CI`` the Hypothesis tests are derandomized (same examples every run).
- Tests marked ``docker`` skip when no engine or image is there, except under
  ``ATC_REQUIRE_DOCKER=1`` (CI), where such a skip is turned into a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support.apis.library import LibraryAPI

# CI must not be flaky: under CI the property tests draw the same examples on every run (and
# never fail on a slow machine's timing); locally they keep exploring new ones.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

REQUIRE_DOCKER = os.environ.get("ATC_REQUIRE_DOCKER") == "1"
# ``../shared`` of the repository root; a git worktree one level deeper (``wt/NAME``) finds it
# from its parent folders the same way.
SHARED = next((p / "shared" for p in Path(__file__).resolve().parents[1:]
               if (p / "shared" / "bench-data").is_dir()), Path(__file__).resolve().parents[2] / "shared")
BENCH_DATA = SHARED / "bench-data"


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, models_dir: Path) -> Iterator[None]:
    for key in list(os.environ):
        if key.startswith(("ATC_", "OPENAI_")) and key != "ATC_REQUIRE_DOCKER":
            monkeypatch.delenv(key, raising=False)
    home = tmp_path / "atc-home"
    monkeypatch.setenv("ATC_HOME", str(home))
    monkeypatch.setenv("ATC_MODELS_DIR", str(models_dir))
    # No test leaves a warm search server behind (each would outlive its test by minutes); the
    # tests of the server (test_search_server.py) turn it on and stop what they start.
    monkeypatch.setenv("ATC_SEARCH_SERVER", "off")
    # Nor a background embedder (atc/retrieval/fill.py): its tests turn it on and wait for it.
    monkeypatch.setenv("ATC_EMBED_BACKGROUND", "off")
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_DOCKER and report.skipped and item.get_closest_marker("docker") is not None:
        report.outcome = "failed"
        report.longrepr = f"docker test skipped under ATC_REQUIRE_DOCKER=1: {report.longrepr}"


@pytest.fixture(scope="session")
def library_api() -> Iterator[LibraryAPI]:
    """The library fixture API on 127.0.0.1 (session-wide; tests read ``api.requests`` after ``api.reset()``)."""
    api = LibraryAPI()
    api.start()
    try:
        yield api
    finally:
        api.stop()


@pytest.fixture()
def api(library_api: LibraryAPI) -> LibraryAPI:
    library_api.reset()
    return library_api


@pytest.fixture(scope="session")
def bench_data() -> Path:
    if not BENCH_DATA.exists():
        pytest.skip(f"public benchmark data not found at {BENCH_DATA}")
    return BENCH_DATA
