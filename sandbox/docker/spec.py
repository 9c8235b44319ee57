"""What a Docker sandbox container is made of: its limits key, mounts, capabilities and profile.

``container_spec`` gives the keyword arguments of ``APIClient.create_container`` for a container
of the Docker backend (``sandbox/docker/backend.py``): no network, a read-only root, a small
noexec ``/tmp``, an empty ``/sys``, the ``atc-v2`` seccomp profile with what the fork server needs
to make each run's namespaces (``seccomp.docker_profile``), private IPC and cgroup namespaces,
cgroup limits on memory (no swap; plus the fork server's own ``SERVER_MB``), pids and CPU,
rlimits on open files and file size, and the fork server (``sandbox/inside/container_server.py``) as its
command, as uid 65534 with no capability at all and the policy's BPF program on its command line
(each run installs it); the runner, the jail and the server are bind-mounted read-only from the
package.

Docker's masked and read-only ``/proc`` paths are off (``MaskedPaths`` and ``ReadonlyPaths``
empty): the kernel lets a user namespace mount a new ``/proc`` only where the container's is
fully visible, and each run mounts its own, which shows its processes and nothing else
(``subset=pid``). What the unmasked container ``/proc`` offers is open to uid 65534 only where
file permissions give it to everyone: no process of the container is root, so the kernel settings
under ``/proc/sys`` stay read-only to all of them.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.api import Limits
from sandbox.inside.seccomp import NAME as FILTER_NAME
from sandbox.inside.seccomp import UnsupportedArch, compile_filter, docker_profile

__all__ = ["ContainerKey", "key_of", "container_spec", "seccomp_option", "run_filter", "RUNNER_PATH", "SERVER_PATH",
           "JAIL_PATH", "SOCKET_DIR", "SOCKET_NAME", "SANDBOX_USER", "SERVER_MB", "SERVER_PROCESSES"]

RUNNER_PATH = "/atc/runner.py"
SERVER_PATH = "/atc/server.py"
JAIL_PATH = "/atc/jail.py"
#: Memory the fork server and its template take in the container, added to the run's limit.
SERVER_MB = 16
#: Processes of the container besides the program's: the server, its template, the run's init,
#: the last run's init while it exits, and the next run's init and runner (made while a run runs).
SERVER_PROCESSES = 6
SOCKET_DIR = "/atc/sock"
SOCKET_NAME = "runner.sock"
SANDBOX_USER = "65534:65534"
MIN_MEMORY_MB = 16


@dataclass(frozen=True)
class ContainerKey:
    """The limits a container is started with; a warm container fits only runs with the same."""

    memory_mb: int
    pids: int
    cpu_seconds: int | None
    file_bytes: int


@functools.lru_cache(maxsize=1)
def seccomp_option() -> str | None:
    """``seccomp=<profile JSON>`` for ``security_opt`` (None where the policy has no profile for
    this machine: Docker's default profile then applies)."""
    try:
        return "seccomp=" + json.dumps(docker_profile(), separators=(",", ":"))
    except UnsupportedArch:
        return None


@functools.lru_cache(maxsize=1)
def run_filter() -> str | None:
    """The policy's BPF program (hex) that every run installs in the container (None where there
    is none for this machine)."""
    try:
        return compile_filter().hex()
    except UnsupportedArch:
        return None


def key_of(limits: Limits) -> ContainerKey:
    return ContainerKey(memory_mb=max(MIN_MEMORY_MB, int(limits.memory_mb)), pids=max(8, int(limits.max_processes)),
                cpu_seconds=limits.cpu_seconds, file_bytes=int(limits.max_file_bytes))



def container_spec(api: Any, key: ContainerKey, *, image: str, sockdir: str, runner: Path, server: Path, jail: Path,
                   cpus: float, tmpfs_mb: int, labels: dict[str, str]) -> dict[str, Any]:
    """The ``create_container`` arguments of a sandbox container for ``key``."""
    from docker.types import LogConfig, Ulimit  # lazy: the docker SDK, loaded only with Docker's engine

    # The CPU limit is each runner's own (the server would add up every run's time).
    ulimits = [Ulimit(name="nofile", soft=256, hard=256),
               Ulimit(name="fsize", soft=key.file_bytes, hard=key.file_bytes)]
    host_config = api.create_host_config(
        binds={str(runner): {"bind": RUNNER_PATH, "mode": "ro"},
               str(server): {"bind": SERVER_PATH, "mode": "ro"},
               str(jail): {"bind": JAIL_PATH, "mode": "ro"},
               sockdir: {"bind": SOCKET_DIR, "mode": "ro"}},
        network_mode="none",
        read_only=True,
        # nr_inodes: empty files cost kernel memory that ``size`` does not count. An empty
        # read-only /sys instead of the host's (devices, firmware, kernel settings). Runs with
        # namespaces of their own see neither: each has its own /tmp, and no /sys.
        tmpfs={"/tmp": f"rw,size={tmpfs_mb}m,nr_inodes=32768,mode=1777,noexec,nosuid,nodev",
               "/sys": "ro,size=4k,nr_inodes=16,nosuid,nodev,noexec"},
        cap_drop=["ALL"],
        security_opt=["no-new-privileges", *filter(None, [seccomp_option()])],
        cgroupns="private",
        pids_limit=key.pids + SERVER_PROCESSES,
        mem_limit=f"{key.memory_mb + SERVER_MB}m",
        memswap_limit=f"{key.memory_mb + SERVER_MB}m",
        nano_cpus=int(cpus * 1e9),
        ulimits=ulimits,
        ipc_mode="private",
        log_config=LogConfig(type="none"),
    )
    # API 1.40+; docker-py has no keyword for them. Empty: see the module docstring.
    host_config["MaskedPaths"] = []
    host_config["ReadonlyPaths"] = []
    command = ["python3", "-I", "-S", SERVER_PATH, "--connect", f"{SOCKET_DIR}/{SOCKET_NAME}", "--runner",
               RUNNER_PATH, "--jail", JAIL_PATH, "--tmpfs-mb", str(tmpfs_mb), "--cpu", str(key.cpu_seconds or 0),
               "--fsize", str(key.file_bytes)]
    bpf = run_filter()
    if bpf is not None and seccomp_option() is not None:
        command += ["--seccomp", bpf, "--seccomp-name", FILTER_NAME]
    return {"image": image, "command": command,
            "user": SANDBOX_USER,  # the server too: nothing in the container is root
            "working_dir": "/tmp", "hostname": "sandbox", "network_disabled": True, "labels": labels,
            "host_config": host_config}
