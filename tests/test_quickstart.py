"""scripts/quickstart.sh, the README's first command, against the existing .venv.

With no model configured it must still exit 0 (the ``atc run`` part worked), print the example
program's answer, say exactly what to set for ``atc solve``, and leave no mock server running.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "quickstart.sh"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is not serving anything.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"))


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "atc").exists(), reason="needs the project's .venv")
def test_quickstart_without_a_model_runs_the_example_and_explains_the_model() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ATC_MODEL"))}
    r = subprocess.run(["bash", str(SCRIPT), "--skip-install", "--sandbox", "local"], capture_output=True,
                       text=True, timeout=240, env=env)
    out = r.stdout
    assert r.returncode == 0, out + r.stderr
    assert "Traceback" not in out + r.stderr
    # The example program's answer: "<title> by <author> (born ...), <price> <currency>: ...".
    assert re.search(r"^.+ by .+ \(born \d{4}\), \d+\.\d\d (EUR|GBP|USD): .+\.$", out, re.M), out
    # What to set for the main job, and the pointer to local OpenAI-compatible servers.
    for word in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ATC_MODEL", "Ollama"):
        assert word in out
    assert "no model is configured" in r.stderr
    assert "quickstart: ok" in out
    m = re.search(r"on (http://127\.0\.0\.1:\d+) \(pid (\d+)\)", out)
    assert m, out
    assert not _alive(int(m.group(2))), "the mock server was left running"


def test_quickstart_rejects_unknown_options() -> None:
    r = subprocess.run(["bash", str(SCRIPT), "--frobnicate"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "unknown option" in r.stderr
