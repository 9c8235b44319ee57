"""A program's output is hostile text: on a terminal, control characters are shown, not sent."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

from tests.support.apis.library import LibraryAPI

ATC = str(Path(sys.executable).with_name("atc"))
PROGRAM = 'import sys\nprint("\\x1b]0;owned\\x07\\x1b[2Jdone")\nsys.stderr.write("\\x1b[31mred\\n")\n'


def _run(args: list[str], *, tty: bool) -> bytes:
    if not tty:
        return subprocess.run(args, capture_output=True, timeout=60).stdout
    leader, follower = pty.openpty()
    with subprocess.Popen(args, stdout=follower, stderr=follower, stdin=subprocess.DEVNULL) as proc:
        os.close(follower)
        out = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the follower side closed: the process is done
                break
            if not chunk:
                break
            out += chunk
        proc.wait(timeout=60)
    os.close(leader)
    return out


def test_escape_sequences_reach_a_terminal_only_as_text(api: LibraryAPI, tmp_path: Path) -> None:
    spec = api.write_spec(tmp_path / "lib.json")
    program = tmp_path / "p.py"
    program.write_text(PROGRAM)
    args = [ATC, "run", str(program), "--tools", str(spec), "--sandbox", "local", "--timeout", "20"]
    on_tty = _run(args, tty=True)
    assert b"\x1b" not in on_tty and b"\x07" not in on_tty
    assert b"\\x1b]0;owned\\x07\\x1b[2Jdone" in on_tty and b"\\x1b[31mred" in on_tty
    piped = _run(args, tty=False)  # a pipe gets the exact answer, for scripts
    assert piped == b"\x1b]0;owned\x07\x1b[2Jdone\n"
