"""The origin rule: where a secret given for one URL may go.

An origin is (scheme, host, port), with the scheme's default port filled in. A credential given
for a URL goes to that URL's origin only; ``http`` -> ``https`` on the same host (default ports) is
allowed too, as an upgrade that keeps the secret just as safe. The gateway follows API redirects by
this rule (``sandbox.gateway.http.redirects``) and ``atc tools import URL`` fetches a spec by it
(``protocols.remote``): one rule, so that they cannot drift apart.
"""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["origin_of", "same_origin", "DEFAULT_PORTS"]

DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> tuple[str, str, int]:
    """``(scheme, host, port)`` of ``url``, lower-cased, with the default port filled in
    (``ValueError`` for a URL whose port is not a number)."""
    parts = urlsplit(str(url))
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or DEFAULT_PORTS.get(scheme, 0)


def same_origin(target: str, origin: str) -> bool:
    """May a secret given for ``origin`` go to ``target``?"""
    try:
        t_scheme, t_host, t_port = origin_of(target)
        o_scheme, o_host, o_port = origin_of(origin)
    except ValueError:
        return False
    if not t_host:
        return False
    if (t_scheme, t_host, t_port) == (o_scheme, o_host, o_port):
        return True
    return (o_scheme, t_scheme) == ("http", "https") and t_host == o_host and o_port == 80 and t_port == 443
