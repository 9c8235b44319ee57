"""Which ``Host`` and ``Origin`` a request to ``atc serve --transport http`` may carry: ``HostCheck``.

A web page the user opens can make the browser send requests to a server on the user's machine:
through a name the page's owner controls that resolves to 127.0.0.1 (DNS rebinding), the request
carries that name as its ``Host`` and the page's origin as its ``Origin``. The bearer token keeps
such a page out as long as it does not have the token; checking both headers keeps it out even
then, and for every bind address, not only the three names the SDK checks by itself.

The names a request may use are the loopback names (``localhost``, ``127.0.0.1``, ``::1``) and the
address the server listens on when it is a loopback one (``127.0.0.2``...), plus every
``--allow-host NAME``. A server that listens on another address (``0.0.0.0``, a LAN address) is
reached by names only its operator knows -- its DNS name, its address, a TLS proxy's name -- so
it refuses to start without at least one ``--allow-host``. Ports are not compared (an SSH tunnel
or a proxy reaches the server on another port under the same name); a name is.

``Host`` must name an allowed host (``421`` otherwise); ``Origin``, when a browser sends one, must
be ``http://`` or ``https://`` an allowed host, any port (``403`` otherwise; ``null`` included).
Clients that are not browsers send no ``Origin``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from atc.errors import UsageError

__all__ = ["HostCheck", "is_loopback", "LOOPBACK_NAMES"]

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def is_loopback(host: str) -> bool:
    if _name(host) == "localhost":
        return True
    try:
        return ipaddress.ip_address(_name(host)).is_loopback
    except ValueError:
        return False


def _name(text: str) -> str:
    """A host name as compared: lower case, no IPv6 brackets, no trailing dot."""
    name = text.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    return name.rstrip(".")


def _allowed(value: str) -> str:
    """An ``--allow-host`` value, checked: a host name or address, nothing more."""
    name = _name(value)
    if not name or any(c in name for c in "/@?#* \t") or "://" in value:
        raise UsageError(f"--allow-host {value!r}: give a host name or address (mcp.example.com, 192.0.2.7)")
    if name.count(":") == 1:  # name:port (an IPv6 address has several colons)
        raise UsageError(f"--allow-host {value!r}: give the name without a port (every port of it is allowed)")
    return name


def _host_name(header: str) -> str | None:
    """The name of a ``Host`` header (``name``, ``name:port``, ``[v6]:port``), or None if malformed."""
    text = header.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return None
        name, rest = text[1:end], text[end + 1:]
    else:
        name, sep, port = text.partition(":")
        rest = sep + port
    if rest and not (rest[0] == ":" and rest[1:].isdigit()):
        return None
    return _name(name) or None


@dataclass(frozen=True)
class HostCheck:
    """The names requests may use for this server (see the module docstring)."""

    names: frozenset[str]

    @classmethod
    def for_bind(cls, bind: str, allow: Iterable[str] = ()) -> HostCheck:
        """The check for a server listening on ``bind``; ``UsageError`` for a bind address that is
        not loopback when no ``--allow-host`` names how clients reach it."""
        extra = [_allowed(v) for v in allow]
        if not is_loopback(bind) and not extra:
            raise UsageError(f"--host {bind} is not a loopback address: say which host names clients use to reach "
                             "the server",
                             hint="add --allow-host NAME (repeatable: its DNS name, its address, a proxy's name); "
                                  "requests naming any other host are refused")
        names = set(LOOPBACK_NAMES) | set(extra)
        if is_loopback(bind):
            names.add(_name(bind))
        return cls(frozenset(names))

    def refusal(self, host: str | None, origin: str | None) -> tuple[int, str] | None:
        """``(status, reason)`` when the headers name a host that is not allowed, else None."""
        name = _host_name(host) if host is not None else None
        if name is None or name not in self.names:
            return 421, "the Host header does not name this server (allowed: " + ", ".join(sorted(self.names)) + \
                "; the operator adds names with --allow-host)"
        if origin is not None and not self._origin_ok(origin):
            return 403, "requests from this Origin are refused (a web page of another site)"
        return None

    def _origin_ok(self, origin: str) -> bool:
        try:
            parts = urlsplit(origin.strip())
            parts.port  # noqa: B018 -- raises ValueError for a port that is not a number
        except ValueError:
            return False
        return parts.scheme in ("http", "https") and _name(parts.hostname or "") in self.names
