"""The host side of the local fork server (``sandbox/inside/zygote.py``): start it, ask it for jails.

``ForkServer.spawn(argv, sock)`` returns a ``ForkedJail``, which answers what the local backend
asks of a jail process (``pid``, ``stdout`` with the jail's report line, ``poll``, ``wait``,
``returncode``) like the ``subprocess.Popen`` of a jail started from scratch does, and kills its
process group through the server (``killpg``): the server is the jail's parent, so only it knows
whether the pid still belongs to the jail.

One reader thread per server takes the server's answers and exit reports. If the server dies,
every jail it forked dies with it (``PR_SET_PDEATHSIG``) and is reported here as killed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any

from protocols.errors import SandboxError
from sandbox.inside import path_of

__all__ = ["ForkServer", "ForkedJail", "zygote_path"]

_START_TIMEOUT = 15.0
#: Runs zygote.py (its path the first argument) as ``__main__`` under the name /atc/zygote.py.
_BOOT = ("import sys; exec(compile(open(sys.argv.pop(1)).read(), '/atc/zygote.py', 'exec'), "
         "{'__name__': '__main__', '__builtins__': __builtins__})")


def zygote_path() -> Path:
    return path_of("zygote.py")


class ForkedJail:
    """One jail forked by the server (the subset of ``Popen`` the local backend uses)."""

    def __init__(self, server: ForkServer, pid: int, stdout: IO[bytes]) -> None:
        self.server = server
        self.pid = pid
        self.stdout: IO[bytes] | None = stdout
        self.returncode: int | None = None
        self._exited = threading.Event()

    def _set_exit(self, status: int) -> None:
        self.returncode = status
        self._exited.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._exited.wait(timeout):
            raise subprocess.TimeoutExpired(f"jail {self.pid}", timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def killpg(self) -> None:
        if self.returncode is None:
            self.server.kill(self.pid)


class ForkServer:
    """A running ``zygote.py`` for one backend; ``close`` ends it and every jail it forked."""

    def __init__(self, python: str, jail: Path, runner: Path) -> None:
        host_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # The server's code is compiled as "/atc/zygote.py" (like the jail's and the runner's): a
        # jail is a fork of it, and must find the install path nowhere (it also renames itself).
        argv = [python, "-I", "-S", "-c", _BOOT, str(zygote_path()), "--control", str(child_end.fileno()),
                "--jail", str(jail), "--runner", str(runner)]
        try:
            self.proc = subprocess.Popen(argv, env={}, cwd="/", stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         pass_fds=(child_end.fileno(),), start_new_session=True)
        except OSError as exc:
            host_end.close()
            raise SandboxError(f"cannot start the local fork server ({python}): {exc}") from exc
        finally:
            child_end.close()
        self.sock = host_end
        self._send_lock = threading.Lock()
        self._lock = threading.Condition()
        self._replies: dict[int, dict[str, Any]] = {}
        self._jails: dict[int, ForkedJail] = {}
        self._early: dict[int, int] = {}  # exits reported before the spawn reply was handled
        self._next_id = 0
        self.dead = False
        self._reader = threading.Thread(target=self._read, name="atc-forkserver", daemon=True)
        self._reader.start()

    def alive(self) -> bool:
        return not self.dead and self.proc.poll() is None

    def spawn(self, argv: list[str], sock: socket.socket) -> ForkedJail:
        """Fork a jail running ``jail.py argv --fd <sock>``; its report comes on ``stdout``."""
        read_end, write_end = os.pipe()
        with self._lock:
            self._next_id += 1
            ident = self._next_id
        try:
            with self._send_lock:
                socket.send_fds(self.sock, [json.dumps({"op": "spawn", "id": ident, "argv": argv}).encode()],
                                [sock.fileno(), write_end])
        except OSError as exc:
            os.close(read_end)
            raise SandboxError(f"the local fork server is gone: {exc}") from exc
        finally:
            os.close(write_end)
        deadline = time.monotonic() + _START_TIMEOUT
        with self._lock:
            while ident not in self._replies and not self.dead and time.monotonic() < deadline:
                self._lock.wait(max(0.0, deadline - time.monotonic()))
            reply = self._replies.pop(ident, None)
            pid = reply.get("pid") if reply else None
            if not isinstance(pid, int):
                os.close(read_end)
                why = (reply or {}).get("error") or ("the fork server died" if self.dead else "no answer")
                raise SandboxError(f"the local fork server could not fork a sandbox: {why}")
            jail = ForkedJail(self, pid, os.fdopen(read_end, "rb", buffering=0))
            if pid in self._early:
                jail._set_exit(self._early.pop(pid))
            else:
                self._jails[pid] = jail
        return jail

    def kill(self, pid: int) -> None:
        try:
            with self._send_lock:
                self.sock.send(json.dumps({"op": "kill", "pid": pid}).encode())
        except OSError:
            pass  # the server is gone, and its jails with it (PR_SET_PDEATHSIG)

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                break
            try:
                msg = json.loads(data)
            except ValueError:
                continue
            with self._lock:
                if msg.get("op") == "spawned" and isinstance(msg.get("id"), int):
                    self._replies[msg["id"]] = msg
                    self._lock.notify_all()
                elif msg.get("op") == "exit" and isinstance(msg.get("pid"), int):
                    jail = self._jails.pop(msg["pid"], None)
                    status = int(msg.get("status") or 0)
                    if jail is None:
                        self._early[msg["pid"]] = status
                    else:
                        jail._set_exit(status)
        with self._lock:
            self.dead = True
            jails, self._jails = list(self._jails.values()), {}
            self._lock.notify_all()
        for jail in jails:  # they got SIGKILL from the kernel when the server died
            jail._set_exit(-signal.SIGKILL)

    def close(self) -> None:
        """End the server: it kills every jail it still has, then exits."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=5)
        self.sock.close()
