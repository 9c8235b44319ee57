"""Redirects: which ones the gateway follows, and how the next request looks.

The gateway follows a redirect only within the ORIGIN of the API the call was made to (same
scheme, host and port; ``http`` -> ``https`` on the same host is allowed too, as an upgrade:
``protocols.origins``, the rule ``atc tools import URL`` follows too),
at most ``MAX_HOPS`` times, to ``http``/``https`` URLs only. A redirect to another origin is not
followed at all, with or without credentials: the call fails with a ``ToolError`` that names the
status and where it pointed. Following it without credentials would still let a program reach
hosts the user never named (any API with an open redirect, like ``/redirect-to?url=...``,
would become a proxy to the host's network); the program can't, so neither does the gateway.

Methods follow RFC 9110 and what clients do: ``303`` -> ``GET`` without a body (``HEAD`` stays
``HEAD``); ``301``/``302`` after a ``POST`` -> ``GET`` (what every browser and httpx do);
``307``/``308`` repeat the same method and body. Same-origin hops keep the request's headers
(credentials included) and the run's cookies of that API.

Each hop is recorded (``ToolCall.redirects``): ``{"status", "location", "followed", "reason"?}``,
with the location redacted like everything else that comes back from an API.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from protocols import origins

__all__ = ["REDIRECT_STATUSES", "MAX_HOPS", "Hop", "next_hop", "origin_of"]

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MAX_HOPS = 10


@dataclass(frozen=True)
class Hop:
    """The decision about one redirect response: ``url`` and ``method`` of the next request when
    ``followed``; else ``reason`` says why not. ``keep_body`` is False when the method became GET."""

    status: int
    location: str
    followed: bool
    url: str = ""
    method: str = ""
    keep_body: bool = True
    reason: str = ""

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {"status": self.status, "location": self.location, "followed": self.followed}
        if self.reason:
            d["reason"] = self.reason
        return d


def origin_of(url: httpx.URL) -> tuple[str, str, int]:
    return origins.origin_of(str(url))


def _same_origin(target: httpx.URL, origin: httpx.URL) -> bool:
    return origins.same_origin(str(target), str(origin))


def next_hop(status: int, location: str | None, current: httpx.URL, origin: httpx.URL, method: str,
             hops: int) -> Hop:
    """What to do with a redirect response ``status`` whose ``Location`` is ``location``, for a
    ``method`` request to ``current``; ``origin`` is the URL of the call's first request and
    ``hops`` the redirects followed so far."""
    if not location:
        return Hop(status, "", False, reason="the redirect has no Location header")
    try:
        target = current.join(location.strip())
    except (httpx.InvalidURL, ValueError):
        return Hop(status, location, False, reason="the Location is not a valid URL")
    if target.scheme.lower() not in ("http", "https"):
        return Hop(status, location, False, reason=f"the gateway never follows a redirect to a {target.scheme}: URL")
    if not _same_origin(target, origin):
        scheme, host, port = origin_of(target)
        return Hop(status, location, False,
                   reason=f"it points to another origin ({scheme}://{host}:{port}); the gateway follows "
                          "redirects within the API's own origin only")
    if hops >= MAX_HOPS:
        return Hop(status, location, False, reason=f"more than {MAX_HOPS} redirects")
    upper = method.upper()
    if status == 303 and upper != "HEAD" or status in (301, 302) and upper == "POST":
        return Hop(status, location, True, url=str(target), method="GET", keep_body=False)
    return Hop(status, location, True, url=str(target), method=upper, keep_body=True)
