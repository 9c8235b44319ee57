"""No temporary directory, file or process of a local run is left on the host.

A jail with namespaces works on a tmpfs of its own. One without (``namespaces=False``, or a
machine where unsharing fails) works in ``<tmp>/atc-run-<owner pid>-*`` and sees the host's
``/tmp``: after each run the backend removes the work directory, what the run's uid made in the
shared temp directories, and the processes it detached. A killed owner's work directories are
removed by the next backend that starts. Judged by what the host sees.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from string import Template

import pytest

from protocols import load_spec
from sandbox.api import Limits, Toolset
from sandbox.local import workdirs
from sandbox.local.backend import LocalBackend
from tests.sandbox.test_hostile import PROGRAMS
from tests.support.apis.library import LibraryAPI

ROOT = Path(__file__).resolve().parents[2]
AS_ROOT = os.geteuid() == 0
LIMITS = Limits(timeout=4, memory_mb=256, max_calls=5, max_output_bytes=200_000, max_processes=32,
                max_file_bytes=8_000_000)


def ours(pid: int | None = None) -> list[str]:
    """The work directories of process ``pid`` (this one by default) in every temp root."""
    pid = os.getpid() if pid is None else pid
    return sorted(str(p) for root in workdirs.temp_roots() for p in Path(root).glob(f"{workdirs.PREFIX}{pid}-*"))


def owned_by(uid: int) -> list[str]:
    """What ``uid`` owns at the top of the shared temp directories, and its processes."""
    found = []
    for top in workdirs.SHARED_TEMP_DIRS:
        try:
            found += [e.path for e in os.scandir(top) if e.stat(follow_symlinks=False).st_uid == uid]
        except OSError:
            continue
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
                if os.stat(f"/proc/{entry}").st_uid == uid and state not in ("Z", "X"):
                    found.append(f"process {entry}")
            except (OSError, IndexError):
                continue
    return found


@pytest.fixture()
def tools(api: LibraryAPI, tmp_path: Path) -> Toolset:
    return Toolset([load_spec(api.write_spec(tmp_path / "library.json"))])


@pytest.fixture(scope="module")
def bare() -> Iterator[LocalBackend]:
    """A backend whose runs have no namespaces (the path that works on the host), no pool."""
    with LocalBackend(pool_size=0, namespaces=False) as b:
        yield b


# Programs that try hard to leave something behind.
LITTER = {
    "files_everywhere": """
import os
os.makedirs('deep/er/still', exist_ok=True)
for i in range(200):
    open('deep/er/still/f%d' % i, 'w').write('x')
for top in ('/tmp', '/var/tmp', '/dev/shm'):
    try:
        open(top + '/atc-litter-%d' % os.getuid(), 'w').write('x')
        os.makedirs(top + '/atc-litter-dir-%d/sub' % os.getuid(), exist_ok=True)
    except OSError:
        pass
print(os.getcwd())
""",
    "locked_subdirectory": """
import os
os.makedirs('locked/inner', exist_ok=True)
open('locked/inner/f', 'w').write('x')
os.chmod('locked/inner', 0)
os.chmod('locked', 0)
print(os.getcwd())
""",
    "workdir_swapped_for_a_link": """
import os
here = os.getcwd()
os.chdir('/')
os.rename(here, here + '-moved')
os.symlink('/etc', here)
print(here)
""",
    "inode_flood": """
import os
for i in range(2000):
    os.mkdir('/tmp/atc-flood-%d-%d' % (os.getuid(), i))
print(os.getcwd())
""",
    "detached_writer": """
import os, time
here = os.getcwd()
if os.fork() == 0:
    os.setsid()
    for i in range(400):
        for top in (here, '/tmp'):
            try:
                open('%s/late-%d-%d' % (top, os.getuid(), i), 'w').write('x')
            except OSError:
                pass
        time.sleep(0.01)
    os._exit(0)
time.sleep(0.05)
print(here)
""",
}


#: Without root the run has the user's own uid: what it detaches or renames cannot be told apart
#: from the user's own processes and files (docs/security.md says so), so these need root.
NEEDS_ROOT = {"detached_writer", "workdir_swapped_for_a_link", "inode_flood"}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(LITTER))
def test_a_run_without_namespaces_leaves_nothing(name: str, bare: LocalBackend, tools: Toolset) -> None:
    if name in NEEDS_ROOT and not AS_ROOT:
        pytest.skip("only root gives a run a uid of its own")
    before = ours()
    result = bare.run(LITTER[name], tools, Limits(timeout=10))
    assert result.ok, result.error
    workdir = result.answer.strip()
    assert workdir.startswith(os.path.join(workdirs.temp_roots()[0], f"{workdirs.PREFIX}{os.getpid()}-"))
    deadline = time.monotonic() + 10  # the runner is reaped in the background
    while (ours() != before or os.path.lexists(workdir)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ours() == before and not os.path.lexists(workdir)
    if AS_ROOT:
        uid = workdirs.run_uid(result.isolation)
        assert uid is not None
        # The removal runs in the background: thousands of files take a while on a busy machine.
        while owned_by(uid) and time.monotonic() < deadline + 20:
            time.sleep(0.1)
        time.sleep(0.3)  # a detached writer that survived would have written again by now
        assert owned_by(uid) == [], f"{name} left: {owned_by(uid)[:5]}"
    assert os.path.isdir("/etc") and not os.path.islink("/etc")


@pytest.mark.timeout(900)
def test_the_hostile_suite_leaves_no_work_directory(api: LibraryAPI, tmp_path: Path) -> None:
    """Every program of the hostile suite (tests/sandbox/test_hostile.py) on a jail without namespaces:
    afterwards no work directory of this process remains, and (as root) nothing of the run uids in
    the shared temp directories (the inode and disk fillers write to the host's /tmp there)."""
    tools = Toolset([load_spec(api.write_spec(tmp_path / "library.json"))])
    before = ours()
    uids: set[int] = set()
    with LocalBackend(pool_size=1, namespaces=False) as bare:
        for case in PROGRAMS:
            if case.name == "inode_exhaustion":
                # Without namespaces it makes tens of thousands of directories in the host's /tmp
                # in its 4 s; removing them takes minutes where the disk is mounted with ``discard``
                # (2.5 ms per rmdir here). ``inode_flood`` above is the same on a bounded scale.
                continue
            program = Template(case.program).safe_substitute(
                secret_file=tmp_path / "none", tmp_file=tmp_path / "none", host_file=tmp_path / "pwned",
                canary=9, api=api.url, host_pid=os.getpid(), atc_home=tmp_path)
            result = bare.run(program, tools, LIMITS)
            uid = workdirs.run_uid(result.isolation)
            if uid is not None:
                uids.add(uid)
    # The backend is closed: every runner is reaped, the warm one included.
    assert ours() == before, f"left behind: {ours()}"
    if AS_ROOT:
        assert uids
        left = {uid: owned_by(uid) for uid in uids}
        assert not any(left.values()), {uid: paths[:5] for uid, paths in left.items() if paths}


def test_a_jail_with_namespaces_makes_no_work_directory(tools: Toolset) -> None:
    before = ours()
    with LocalBackend(pool_size=0) as b:
        result = b.run("import os\nprint(os.getcwd())", tools, Limits(timeout=10))
        during = ours()
    assert result.ok, result.error
    if "mountns" not in result.isolation:
        pytest.skip("namespaces are not available here: the jail fell back")
    assert result.answer.strip() == "/work" and during == before


def test_the_work_directory_a_jail_makes_when_it_falls_back_is_removed(tools: Toolset,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A jail that was expected to have namespaces but has none (unsharing failed) makes its own
    work directory, named after the backend's process, and reports it: the backend removes it."""
    before = ours()
    monkeypatch.setattr(workdirs, "make_workdir", lambda uid=None: "")  # the backend makes none
    with LocalBackend(pool_size=0, namespaces=False) as b:
        result = b.run("import os\nprint(os.getcwd())", tools, Limits(timeout=10))
        workdir = result.answer.strip()
        assert result.ok, result.error
        assert Path(workdir).name.startswith(f"{workdirs.PREFIX}{os.getpid()}-")
    assert not os.path.lexists(workdir) and ours() == before


OWNER = """
import sys
sys.path.insert(0, {root!r})
from sandbox.api import Limits
from sandbox.local.backend import LocalBackend
backend = LocalBackend(pool_size=2, namespaces=False)
print(backend.prewarm(Limits(timeout=30), timeout=60), flush=True)
import time
time.sleep(600)
"""


@pytest.mark.timeout(120)
def test_the_work_directories_of_a_killed_owner_are_swept() -> None:
    proc = subprocess.Popen([sys.executable, "-c", OWNER.format(root=str(ROOT))], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "2"
        left = ours(proc.pid)
        assert len(left) == 2, left
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert ours(proc.pid) == left  # nobody cleaned up: the owner died
    with LocalBackend(pool_size=0):
        pass
    assert ours(proc.pid) == []


def test_the_sweep_spares_live_owners_and_foreign_names(tmp_path: Path) -> None:
    root = Path(workdirs.temp_roots()[0])
    live = root / f"{workdirs.PREFIX}{os.getppid()}-live"
    foreign = root / f"{workdirs.PREFIX}not-a-pid"
    for path in (live, foreign):
        path.mkdir()
    try:
        workdirs.sweep()
        assert live.is_dir() and foreign.is_dir()
    finally:
        live.rmdir()
        foreign.rmdir()


def test_remove_workdir_only_touches_work_directories(tmp_path: Path) -> None:
    victim = tmp_path / "atc-run-1-precious"
    victim.mkdir()
    assert workdirs.remove_workdir(str(victim)) is False  # not directly in a temp root
    assert workdirs.remove_workdir("/etc") is False and os.path.isdir("/etc")
    assert victim.is_dir()
    made = workdirs.make_workdir()
    (Path(made) / "sub").mkdir()
    assert workdirs.is_workdir(made) and workdirs.remove_workdir(made) and not os.path.lexists(made)


def test_owner_of_names() -> None:
    assert workdirs.owner_of("atc-run-123-abc") == 123
    assert workdirs.owner_of("atc-run-abc") is None
    assert workdirs.owner_of("atc-run-123") is None
    assert workdirs.owner_of("other-123-abc") is None
