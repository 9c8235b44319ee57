"""Specs served at a URL: ``atc tools import http://127.0.0.1:8888/api/spec.yaml``.

Many servers serve their own OpenAPI document (``/openapi.json``, ``/swagger.json``,
``/api/spec.yaml``). ``fetch_spec`` reads one over HTTP(S) for any URL the user names, loopback
included, with a timeout on the whole transfer, a size cap, at most ``MAX_REDIRECTS`` redirects
and ``Accept-Encoding: identity`` (a spec is read whole; there is no need to trust a
decompressor with it). Every failure is a ``ProtocolError`` naming the URL: connection refused,
timeout, an HTTP error status, too large, not text. ``headers`` are sent with the request (a
token the server wants before it shows its spec); they are never stored.

Redirects are followed by hand, by the gateway's origin rule (``protocols.origins``): ``headers``
(the user's secrets) and cookies go to the origin of the URL the user named only. A redirect to
another origin (a CDN, a mirror) is still followed, without them: httpx's own redirect handling
drops only ``Authorization`` and ``Cookie``, and would hand an ``X-API-Key`` header to whatever
host a redirect names. A query credential is part of the URL named, so a redirect never carries it.

The proxy settings of the environment are not used, as for tool calls: the URL the user names
is the host atc talks to.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from protocols.errors import ProtocolError
from protocols.origins import origin_of, same_origin

__all__ = ["fetch_spec", "is_url", "MAX_SPEC_BYTES", "FETCH_TIMEOUT", "MAX_REDIRECTS"]

MAX_SPEC_BYTES = 64 * 1024 * 1024
FETCH_TIMEOUT = 30.0
MAX_REDIRECTS = 5


def is_url(text: str) -> bool:
    return text.lower().startswith(("http://", "https://"))


def fetch_spec(url: str, *, headers: Mapping[str, str] | None = None, timeout: float = FETCH_TIMEOUT,
               max_bytes: int = MAX_SPEC_BYTES, label: str | None = None) -> tuple[str, str]:
    """``(text, final URL)`` of the document at ``url`` (see the module docstring). ``label`` is
    how errors name the source (default: the URL)."""
    import httpx  # lazy: httpx costs ~0.2 s of imports, which a spec read from a file never needs

    source = label or url
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise ProtocolError("not an http(s) URL", source=source)
    end = time.monotonic() + timeout
    plain = {"Accept": "application/json, application/yaml, text/yaml, */*;q=0.5", "Accept-Encoding": "identity"}
    secret = dict(headers or {})
    current, hops, dropped = url, 0, False
    try:
        with httpx.Client(follow_redirects=False, trust_env=False, timeout=timeout) as client:
            while True:
                mine = same_origin(current, url)
                if not mine:
                    dropped = dropped or bool(secret)
                    client.cookies.clear()  # cookies the named origin set stay with it
                with client.stream("GET", current, headers={**plain, **(secret if mine else {})}) as response:
                    if response.status_code in _REDIRECTS and response.headers.get("location"):
                        hops += 1
                        if hops > MAX_REDIRECTS:
                            raise ProtocolError(f"cannot fetch the spec: more than {MAX_REDIRECTS} redirects",
                                                source=source)
                        current = _next_url(response, source)
                        continue
                    body, final, charset = _read(response, url, source, max_bytes, end, timeout, dropped)
                    break
    except httpx.TimeoutException:
        raise ProtocolError(f"the spec did not arrive within {timeout:g} s", source=source) from None
    except httpx.HTTPError as exc:
        raise ProtocolError(f"cannot fetch the spec: {type(exc).__name__}: {exc}", source=source) from None
    try:
        text = bytes(body).decode("utf-8-sig" if charset.lower().replace("_", "-") in ("utf-8", "utf8") else charset)
    except (UnicodeDecodeError, LookupError):
        raise ProtocolError("the spec is not text in its declared encoding", source=source) from None
    if not text.strip():
        raise ProtocolError("the server answered with an empty document", source=source)
    return text, final


_REDIRECTS = frozenset({301, 302, 303, 307, 308})


def _next_url(response: Any, source: str) -> str:
    """Where a redirect points (http(s) only)."""
    import httpx  # lazy: see fetch (a spec read from a file never needs httpx)

    try:
        target = response.url.join(response.headers["location"].strip())
    except (httpx.InvalidURL, ValueError):
        raise ProtocolError("cannot fetch the spec: a redirect's Location is not a valid URL", source=source) from None
    if target.scheme.lower() not in ("http", "https"):
        raise ProtocolError(f"cannot fetch the spec: a redirect points to a {target.scheme}: URL", source=source)
    return str(target)


def _read(response: Any, url: str, source: str, max_bytes: int, end: float, timeout: float,
          dropped: bool) -> tuple[bytearray, str, str]:
    """The body of the final response, its URL and charset (``ProtocolError`` for an error status,
    an HTML page, a body over the cap or late)."""
    scheme, host, port = origin_of(str(response.url))
    elsewhere = f" (after a redirect to {scheme}://{host}:{port}, another origin: the credential was not sent " \
                "there)" if dropped else ""
    if response.status_code >= 400:
        hint = None
        if response.status_code in (401, 403):
            hint = "the credential is for the URL you named only; fetch the spec from where it really is" \
                if dropped else "the server wants a credential: add --credential (e.g. header:Authorization=env:VAR)"
        raise ProtocolError(f"cannot fetch the spec: HTTP {response.status_code}{elsewhere}", source=source, hint=hint)
    if not 200 <= response.status_code < 300:
        raise ProtocolError(f"cannot fetch the spec: HTTP {response.status_code} (not a document)", source=source)
    if response.headers.get("content-type", "").lower().startswith("text/html"):
        where = f" (at {response.url.path})" if str(response.url) != url else ""
        raise ProtocolError(f"the server answered with an HTML page{where}{elsewhere}, not a spec", source=source,
                            hint="a login page usually means the server wants a credential: "
                                 "add --credential (e.g. header:Authorization=env:VAR)")
    declared = response.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise ProtocolError(f"the spec is larger than the {max_bytes}-byte cap ({declared} bytes)", source=source)
    body = bytearray()
    for chunk in response.iter_bytes():
        body += chunk
        if len(body) > max_bytes:
            raise ProtocolError(f"the spec is larger than the {max_bytes}-byte cap", source=source)
        if time.monotonic() > end:
            raise ProtocolError(f"the spec did not arrive within {timeout:g} s", source=source)
    return body, str(response.url), response.charset_encoding or "utf-8"
