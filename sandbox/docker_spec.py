"""What a Docker sandbox container is made of: its limits key, mounts, capabilities and profile.

``container_spec`` gives the keyword arguments of ``APIClient.create_container`` for a container
of the Docker backend (``sandbox/docker_backend.py``): no network, a read-only root, a small
noexec ``/tmp``, an empty ``/sys``, ``/proc`` masked, the ``atc-v1`` seccomp profile, private IPC
and cgroup namespaces, cgroup limits on memory (no swap; plus the fork server's own
``SERVER_MB``), pids and CPU, rlimits on open files and file size, and the fork server
(``sandbox/container_server.py``) as its command, running as root with nothing but
CAP_SETUID/CAP_SETGID; the runner and the server are bind-mounted read-only from the package.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.api import Limits
from sandbox.jail import PROC_MASKED
from sandbox.seccomp import UnsupportedArch, docker_profile

__all__ = ["ContainerKey", "key_of", "container_spec", "seccomp_option", "RUNNER_PATH", "SERVER_PATH",
           "SOCKET_DIR", "SOCKET_NAME", "SANDBOX_USER", "SERVER_MB", "MASKED_PATHS"]

RUNNER_PATH = "/atc/runner.py"
SERVER_PATH = "/atc/server.py"
#: Memory the fork server itself takes in the container, added to the run's limit.
SERVER_MB = 16
SOCKET_DIR = "/atc/sock"
SOCKET_NAME = "runner.sock"
SANDBOX_USER = "65534:65534"
MIN_MEMORY_MB = 16
#: Docker's own masked paths plus what else /proc tells of the host (the local jail's list).
MASKED_PATHS = sorted({"/sys/firmware", *(f"/proc/{name}" for name in PROC_MASKED)})


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


def key_of(limits: Limits) -> ContainerKey:
    return ContainerKey(memory_mb=max(MIN_MEMORY_MB, int(limits.memory_mb)), pids=max(8, int(limits.max_processes)),
                cpu_seconds=limits.cpu_seconds, file_bytes=int(limits.max_file_bytes))



def container_spec(api: Any, key: ContainerKey, *, image: str, sockdir: str, runner: Path, server: Path, cpus: float,
                   tmpfs_mb: int, labels: dict[str, str]) -> dict[str, Any]:
    """The ``create_container`` arguments of a sandbox container for ``key``."""
    from docker.types import LogConfig, Ulimit

    # The CPU limit is each runner's own (the server would add up every run's time).
    ulimits = [Ulimit(name="nofile", soft=256, hard=256),
               Ulimit(name="fsize", soft=key.file_bytes, hard=key.file_bytes)]
    host_config = api.create_host_config(
        binds={str(runner): {"bind": RUNNER_PATH, "mode": "ro"},
               str(server): {"bind": SERVER_PATH, "mode": "ro"},
               sockdir: {"bind": SOCKET_DIR, "mode": "ro"}},
        network_mode="none",
        read_only=True,
        # nr_inodes: empty files cost kernel memory that ``size`` does not count. An empty
        # read-only /sys instead of the host's (devices, firmware, kernel settings).
        tmpfs={"/tmp": f"rw,size={tmpfs_mb}m,nr_inodes=32768,mode=1777,noexec,nosuid,nodev",
               "/sys": "ro,size=4k,nr_inodes=16,nosuid,nodev,noexec"},
        # The fork server needs these two to hand each runner to uid 65534; the runner loses
        # them (and every other capability) with that change.
        cap_drop=["ALL"],
        cap_add=["SETUID", "SETGID"],
        security_opt=["no-new-privileges", *filter(None, [seccomp_option()])],
        cgroupns="private",
        pids_limit=key.pids + 2,  # the server and, between runs, its cleaner
        mem_limit=f"{key.memory_mb + SERVER_MB}m",
        memswap_limit=f"{key.memory_mb + SERVER_MB}m",
        nano_cpus=int(cpus * 1e9),
        ulimits=ulimits,
        ipc_mode="private",
        log_config=LogConfig(type="none"),
    )
    host_config["MaskedPaths"] = MASKED_PATHS  # API 1.40+; docker-py has no keyword for it
    return {"image": image,
            "command": ["python3", "-I", "-S", SERVER_PATH, "--connect", f"{SOCKET_DIR}/{SOCKET_NAME}",
                        "--runner", RUNNER_PATH],
            "user": "0:0",  # the server only; every program runs as SANDBOX_USER
            "working_dir": "/tmp", "hostname": "sandbox", "network_disabled": True, "labels": labels,
            "host_config": host_config}
