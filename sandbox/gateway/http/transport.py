"""The HTTP transport: one validated call -> request(s) on the wire -> a ``Reply``.

``HttpTransport.send(tool, args, extra_query)`` is the whole HTTP side of a call, and the one
place the gateway hands a call to the network (another transport, e.g. for MCP tools, sits next
to it behind the same ``send``). For one run it holds:

- where each collection's API is (``Toolset.base_url_for``: per collection, the run's override,
  else the spec's server),
- the credentials (``sandbox.gateway.http.credentials``), read from the host environment when a request
  is built and never before,
- the run's cookie jar, only for collections whose spec declares cookies: cookies one response
  sets are sent on this run's later calls to the same host of that API, and forgotten with the
  run (the shared client keeps none, see ``NoCookies``),
- the deadline: the call's timeout covers every redirect hop and the whole body, and a server
  dripping bytes is cut off by a watchdog at that moment.

A response that arrives is a ``Reply`` whatever its status (the gateway decides what an error
is); a call that gets no usable response raises ``SendFailure`` whose ``failure`` says why
(``config``, ``arguments``, ``connect``, ``timeout``, ``response``).
"""

from __future__ import annotations

import heapq
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.cookiejar import CookieJar
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from protocols.errors import ConfigError, ToolError
from protocols.model import Collection, SecurityScheme, Tool
from protocols.writes import READ_METHODS
from sandbox.api import Limits, Toolset
from sandbox.gateway.http import credentials as creds
from sandbox.gateway.http.decoding import BodyTooLarge, accept_encoding, read_body, to_data
from sandbox.gateway.http.redirects import REDIRECT_STATUSES, Hop, next_hop, origin_of
from sandbox.gateway.http.request import Prepared, build, check_text
from sandbox.hostbounds import HostBounds

__all__ = ["HttpTransport", "Reply", "SendFailure", "NoCookies", "shared_client", "uses_cookies",
           "MAX_HEADERS", "MAX_HEADER_CHARS"]

#: Most response headers handed to a program, and the longest value (longer ones are cut).
MAX_HEADERS = 100
MAX_HEADER_CHARS = 8192
_CLIENT: httpx.Client | None = None
_CLIENT_LOCK = threading.Lock()
_ACCEPT_ENCODING: str | None = None


class NoCookies(CookieJar):
    """A cookie jar that keeps nothing. The shared client serves every run and every API of the
    process: a cookie one response sets must not ride along on anyone else's request."""

    def set_cookie(self, cookie: Any) -> None:
        return None

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None


def shared_client() -> httpx.Client:
    """The process-wide HTTP client of gateways that were not given one (connection reuse; no
    cookie jar, see ``NoCookies``; redirects are the transport's to follow). Its transport makes
    the TLS side on the first ``https`` request (``_SchemeRouter``)."""
    global _CLIENT
    with _CLIENT_LOCK:
        if _CLIENT is None:
            limits = httpx.Limits(max_connections=64, max_keepalive_connections=32)
            _CLIENT = httpx.Client(follow_redirects=False, trust_env=False, cookies=NoCookies(),
                                   transport=_SchemeRouter(limits))
        return _CLIENT


class _SchemeRouter(httpx.BaseTransport):
    """One connection pool per scheme, the ``https`` one made on first use.

    httpx loads the certificate store when a transport is made (about 0.1 s), which a command that
    calls only local ``http`` APIs (``atc mock``, a server on 127.0.0.1) never needs. ``https`` is
    verified exactly as httpx's default transport does; other schemes are refused."""

    def __init__(self, limits: httpx.Limits) -> None:
        self._limits = limits
        # verify=False only skips loading certificates: this pool never sees https.
        self._plain = httpx.HTTPTransport(verify=False, limits=limits, trust_env=False)
        self._tls: httpx.HTTPTransport | None = None
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme == "http":
            return self._plain.handle_request(request)
        if request.url.scheme != "https":
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {request.url.scheme!r}", request=request)
        with self._lock:
            if self._tls is None:
                self._tls = httpx.HTTPTransport(limits=self._limits, trust_env=False)
        return self._tls.handle_request(request)

    def close(self) -> None:
        self._plain.close()
        with self._lock:
            if self._tls is not None:
                self._tls.close()


def uses_cookies(collection: Collection) -> bool:
    """Does the spec declare cookies (a cookie parameter, or an API key sent as a cookie)? Only such
    a collection gets a per-run cookie jar."""
    if any(s.location == "cookie" for s in collection.security_schemes.values() if s.type == "apiKey"):
        return True
    return any(b.location == "cookie" for t in collection.tools for b in t.bindings.values())


@dataclass
class Reply:
    """What the API answered: status, headers (lower-case names; repeated ones joined with
    ``", "``), the body as program data and as raw bytes, and the redirects followed on the way.
    ``status`` is None for a transport without status codes (an MCP result). ``redacted`` counts
    secrets taken out before the gateway got the reply (a replayed answer was redacted when it
    was recorded; the count is the recording's)."""

    status: int | None
    headers: dict[str, str]
    data: Any
    raw: bytes
    redirects: list[dict[str, Any]] = field(default_factory=list)
    redacted: int = 0


class SendFailure(ToolError):
    """A call that got no usable response. ``failure`` is ``config``, ``arguments``, ``connect``,
    ``timeout`` or ``response``; ``redirects`` are the hops followed before it failed."""

    def __init__(self, message: str, *, tool: str, failure: str, status: int | None = None,
                 hint: str | None = None, redirects: list[dict[str, Any]] | None = None,
                 parameter: str | None = None) -> None:
        super().__init__(message, tool=tool, status=status, hint=hint, parameter=parameter)
        self.failure = failure
        self.redirects = redirects or []


def _program_headers(response: httpx.Response) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in response.headers.multi_items():
        key = name.lower()
        if key not in out and len(out) >= MAX_HEADERS:
            continue
        out[key] = (out[key] + ", " + value if key in out else value)[:MAX_HEADER_CHARS]
    return out


class HttpTransport:
    """Sends the HTTP calls of ONE run (see the module docstring)."""

    def __init__(self, toolset: Toolset, limits: Limits, client: httpx.Client, environ: Mapping[str, str],
                 deadline: float | None) -> None:
        self.toolset = toolset
        self.limits = limits
        self.client = client
        self.environ = environ
        self.deadline = deadline
        # collection -> host -> cookie name -> value; only for collections that declare cookies.
        self._jars: dict[str, dict[str, dict[str, str]]] = {}
        self._plans: dict[str, tuple[dict[str, str], list[tuple[creds.Placement, str]]]] = {}
        self._origin_sets: dict[str, set[tuple[str, str, int]]] = {}

    # -- where, and with which secrets ----------------------------------------------------------

    def base_url(self, tool: Tool) -> str:
        base = self.toolset.base_url_for(tool.name)
        if not base:
            raise SendFailure(f"{tool.name}: the spec names no server URL", tool=tool.name, failure="config",
                              hint="pass --base-url URL")
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise SendFailure(f"{tool.name}: server URL {base!r} is not an absolute http(s) URL", tool=tool.name,
                              failure="config", hint="pass --base-url URL")
        return base.rstrip("/")

    def plan(self, collection: Collection) -> tuple[dict[str, str], list[tuple[creds.Placement, str]]]:
        """The credentials bound to ``collection`` (``credentials.bind``): its schemes given, and
        placements. A credential that cannot be bound to exactly one collection is sent nowhere
        (``ConfigError``; the call fails with ``config``, as ``check`` says before a run)."""
        found = self._plans.get(collection.name)
        if found is None:
            found = creds.for_collection(self.toolset.credentials, collection, self.toolset.collections)
            self._plans[collection.name] = found
        return found

    def _origins(self, collection: Collection) -> set[tuple[str, str, int]]:
        """The origins of ``collection``'s API in this run (its tools' base URLs): the only places
        its credentials are sent to."""
        found = self._origin_sets.get(collection.name)
        if found is None:
            found = set()
            for t in collection.tools:
                base = self.toolset.base_url_for(t.name)
                if base and base.lower().startswith(("http://", "https://")):
                    try:
                        found.add(origin_of(httpx.URL(base)))
                    except (httpx.InvalidURL, ValueError):
                        continue
            self._origin_sets[collection.name] = found
        return found

    def _secret(self, tool: Tool, key: str, source: str) -> str:
        var = creds.env_var(source)
        value = self.environ.get(var)
        if value is None:
            raise SendFailure(f"{tool.name}: credential {key!r}: environment variable {var} is not set",
                              tool=tool.name, failure="config", hint=f"export {var}=... on the host")
        return check_text(tool, key, value)

    def _add_credentials(self, tool: Tool, url: str, headers: dict[str, str], query: list[tuple[str, str]],
                         cookies: list[tuple[str, str]]) -> None:
        collection = self.toolset.collection_of(tool.name)
        try:
            given, placements = self.plan(collection)
        except ConfigError as exc:
            raise SendFailure(f"{tool.name}: {exc.message}", tool=tool.name, failure="config", hint=exc.hint) from None
        if not (given or placements):
            return
        try:
            origin = origin_of(httpx.URL(url))
        except (httpx.InvalidURL, ValueError):
            origin = None
        if origin not in self._origins(collection):
            # Built from the collection's own base URL, a request cannot leave its origin (path
            # values are encoded piece by piece); should one ever, it goes without the secrets.
            return
        declared = bool(tool.security)
        # Many specs (RapidAPI ones above all) declare no security although the API wants a key:
        # then every credential given for the collection is sent, and one whose variable is unset
        # is skipped rather than failing a tool that may not need it. A declared requirement is
        # strict: its secret must be there.
        alternatives = tool.security or [[s for s in collection.security_schemes if s in given]]
        chosen = next((alt for alt in alternatives if alt and all(s in given for s in alt)), None)
        raw_query: list[tuple[str, str]] = []
        wanted: list[tuple[SecurityScheme, str, str]] = []
        for name in chosen or []:
            scheme = collection.security_schemes.get(name)
            if scheme is None or (not declared and creds.env_var(given[name]) not in self.environ):
                continue
            wanted.append((scheme, name, given[name]))
        wanted += [(p.scheme(), p.scheme().name, source) for p, source in placements]
        for scheme, key, source in wanted:
            creds.apply_secret(scheme, self._secret(tool, key, source), headers, raw_query, cookies)
        query += [(quote(k, safe="[]"), quote(v, safe="")) for k, v in raw_query]

    # -- cookies --------------------------------------------------------------------------------

    def _jar(self, tool: Tool, url: str) -> dict[str, str] | None:
        """The run's cookies for ``tool``'s API at the host of ``url`` (None: this API keeps none)."""
        collection = self.toolset.collection_of(tool.name)
        jars = self._jars.get(collection.name)
        if jars is None:
            if not uses_cookies(collection):
                return None
            jars = self._jars[collection.name] = {}
        return jars.setdefault(urlsplit(url).netloc.lower(), {})

    def _keep_cookies(self, tool: Tool, response: httpx.Response) -> None:
        jar = self._jar(tool, str(response.url))
        if jar is None:
            return
        for cookie in response.cookies.jar:
            if cookie.value is None or cookie.is_expired():
                jar.pop(cookie.name, None)
            else:
                jar[cookie.name] = cookie.value

    def _cookie_header(self, tool: Tool, url: str, explicit: list[tuple[str, str]]) -> str:
        jar = self._jar(tool, url) or {}
        # The run's session cookies first; a cookie the call sets itself wins over one of the same name.
        names = {n for n, _ in explicit}
        pairs = [(k, v) for k, v in jar.items() if k not in names] + explicit
        return "; ".join(f"{k}={v}" for k, v in pairs)

    # -- the exchange ---------------------------------------------------------------------------

    def _timeout(self) -> float:
        timeout = self.limits.call_timeout
        if self.deadline is not None:
            timeout = min(timeout, max(0.05, self.deadline - time.monotonic()))
        return timeout

    def prepare(self, tool: Tool, args: dict[str, Any], extra_query: dict[str, Any] | None = None) -> Prepared:
        """The first request of a call, credentials included; its query is in ``url``."""
        base = self.base_url(tool)
        try:
            prepared, query = build(tool, args, base, extra_query)
        except ToolError as exc:
            raise SendFailure(exc.message, tool=tool.name, failure="arguments", parameter=exc.parameter) from None
        except ValueError as exc:
            raise SendFailure(f"{tool.name}: the request could not be made: {exc}", tool=tool.name,
                              failure="arguments") from None
        self._add_credentials(tool, prepared.url, prepared.headers, query, prepared.cookies)
        global _ACCEPT_ENCODING
        if _ACCEPT_ENCODING is None:
            _ACCEPT_ENCODING = accept_encoding()
        if not any(k.lower() == "accept-encoding" for k in prepared.headers):
            prepared.headers["Accept-Encoding"] = _ACCEPT_ENCODING
        prepared.url = prepared.full_url("&".join(f"{k}={v}" for k, v in query))
        return prepared

    def send(self, tool: Tool, args: dict[str, Any], extra_query: dict[str, Any] | None = None, *,
             hop_check: Callable[[str, str, int], tuple[str | None, float]] | None = None) -> Reply:
        """Send the call (following same-origin redirects) and read the answer. ``hop_check`` is
        asked before a redirect would send a write again (its method kept) to another URL: a
        refusal ends the call there, like a redirect to another origin (the time it took to
        decide, a person's, is added to the call's time)."""
        prepared = self.prepare(tool, args, extra_query)
        timeout = self._timeout()
        end = time.monotonic() + timeout
        origin = httpx.URL(prepared.url)
        url, method, content = prepared.url, prepared.method, prepared.content
        headers = dict(prepared.headers)
        hops: list[dict[str, Any]] = []
        while True:
            cookie = self._cookie_header(tool, url, prepared.cookies)
            sent_headers = {**headers, **({"Cookie": cookie} if cookie else {})}
            status, response_headers, raw, location = self._one(tool, method, url, sent_headers, content, end,
                                                                timeout, hops)
            if status not in REDIRECT_STATUSES:
                break
            followed = sum(1 for h in hops if h["followed"])
            hop = next_hop(status, location, httpx.URL(url), origin, method, followed)
            if hop.followed and hop_check is not None and hop.method.upper() not in READ_METHODS:
                refused, waited = hop_check(hop.method, hop.url, followed + 1)
                end += waited
                if refused:
                    hop = Hop(status, hop.location, False, reason=f"the write would be sent again to {hop.url.split('?')[0]}, "
                                                                  f"which was refused: {refused}")
            hops.append(hop.to_dict())
            if not hop.followed:
                break
            url, method = hop.url, hop.method
            if not hop.keep_body:
                content = None
                headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
        content_type = response_headers.get("content-type", "")
        try:
            data = to_data(raw, content_type, HostBounds.of(self.limits).frame_values)
        except ValueError as exc:
            raise SendFailure(f"{tool.name}: {exc}", tool=tool.name, failure="response", status=status,
                              redirects=hops) from None
        return Reply(status=status, headers=response_headers, data=data, raw=raw, redirects=hops)

    def _one(self, tool: Tool, method: str, url: str, headers: dict[str, str], content: bytes | None, end: float,
             timeout: float, hops: list[dict[str, Any]]) -> tuple[int, dict[str, str], bytes, str | None]:
        """One request/response on the wire: (status, headers, decoded body, Location)."""
        remaining = max(0.05, end - time.monotonic())
        request = self.client.build_request(method, url, headers=headers, content=content, timeout=remaining)
        token = None
        response = None
        try:
            response = self.client.send(request, stream=True)
            # httpx's timeouts are per read: a server dripping a byte at a time would hold the
            # call, and the whole run, open for ever. The watchdog cuts the body off at ``end``.
            token = _WATCHDOG.arm(end, response)
            status = response.status_code
            if "set-cookie" in response.headers:
                self._keep_cookies(tool, response)
            program_headers = _program_headers(response)
            location = response.headers.get("location")
            body = read_body(_until(response.iter_raw(), end), response.headers.get("content-encoding", ""),
                             self.limits.max_response_bytes, tool.name)
            if _WATCHDOG.disarm(token):
                raise httpx.ReadTimeout("the response body did not end in time")
            token = None
            return status, program_headers, body, location
        except BodyTooLarge as exc:
            raise SendFailure(f"{tool.name}: response {exc}", tool=tool.name, failure="response",
                              status=response.status_code if response is not None else None,
                              redirects=hops) from None
        except SendFailure:
            raise
        except ToolError as exc:
            raise SendFailure(exc.message, tool=tool.name, failure="response", hint=exc.hint, redirects=hops,
                              status=response.status_code if response is not None else None) from None
        except httpx.TimeoutException as exc:
            raise SendFailure(f"{tool.name}: no response within {timeout:.1f} s", tool=tool.name,
                              failure="timeout", redirects=hops) from exc
        except httpx.HTTPError as exc:
            if token is not None and _WATCHDOG.disarm(token):
                token = None
                raise SendFailure(f"{tool.name}: no response within {timeout:.1f} s", tool=tool.name,
                                  failure="timeout", redirects=hops) from exc
            kind = "connect" if isinstance(exc, httpx.ConnectError) else "response" if response is not None \
                else "request"
            where = f" to {urlsplit(url).netloc}" if kind == "connect" else ""
            raise SendFailure(f"{tool.name}: request failed{where}: {type(exc).__name__}: {exc}", tool=tool.name,
                              failure=kind, redirects=hops) from exc
        finally:
            if token is not None:
                _WATCHDOG.disarm(token)
            if response is not None:
                response.close()


def _until(chunks: Iterator[bytes], end: float) -> Iterator[bytes]:
    for chunk in chunks:
        if time.monotonic() > end:
            raise httpx.ReadTimeout("the response body did not end in time")
        yield chunk


class _Watchdog:
    """One daemon thread that shuts down the socket of a response still being read at its
    deadline, which makes the blocked read return at once (a timer thread per call would cost
    more than a local API call)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._armed: dict[int, socket.socket] = {}
        self._count = 0
        self._thread: threading.Thread | None = None

    def arm(self, at: float, response: httpx.Response) -> int | None:
        """Watch ``response`` until ``at`` (a ``time.monotonic()`` value); the token for ``disarm``,
        or None when the transport exposes no socket (then only the per-chunk check holds)."""
        stream = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if not isinstance(sock, socket.socket):
            return None
        with self._cond:
            self._count += 1
            token = self._count
            self._armed[token] = sock
            heapq.heappush(self._heap, (at, token))
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="atc-gateway-watchdog", daemon=True)
                self._thread.start()
            if self._heap[0][1] == token:
                self._cond.notify()
        return token

    def disarm(self, token: int | None) -> bool:
        """Stop watching; True when the deadline had already struck (the socket was shut down)."""
        if token is None:
            return False
        with self._cond:
            return self._armed.pop(token, None) is None

    def _loop(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                while self._heap and (self._heap[0][0] <= now or self._heap[0][1] not in self._armed):
                    _at, token = heapq.heappop(self._heap)
                    sock = self._armed.pop(token, None)
                    if sock is not None:
                        try:
                            sock.shutdown(socket.SHUT_RDWR)
                        except OSError:
                            pass
                self._cond.wait(timeout=self._heap[0][0] - now if self._heap else None)


_WATCHDOG = _Watchdog()
