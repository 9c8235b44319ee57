"""The host-side tool gateway: one program's tool calls become validated HTTP requests.

A program in the sandbox never talks to an API. Its tool functions are stubs that send
``{"tool", "args"}`` over the channel, and the session hands them to ``Gateway.call``, which

1. checks the call budget (``Limits.max_calls``; past it every call answers ``CallBudget``),
2. validates the arguments against the tool's JSON Schema *before* any request (unknown argument,
   missing required, wrong type -> a ``ToolError`` naming the tool and the parameter; validators
   are compiled once per schema and cached),
3. builds the request: path parameters percent-encoded so that ``/`` and ``..`` never change the
   path, header/query/cookie values refused when they carry CR, LF or NUL, credentials added
   from the host environment only (``Toolset.credentials``: scheme -> ``env:VAR``),
4. sends it on one shared ``httpx.Client`` with a per-call timeout, streams the response and
   stops reading at ``Limits.max_response_bytes``,
5. takes every credential value the host holds out of the response and the error text
   (``sandbox.redact``: an API that echoes headers must not hand the program its key),
6. records a ``ToolCall`` (tool, args, method, path *template*, status, line, column, duration,
   error, response, redacted) and returns JSON data, or an error whose message names the tool,
   the HTTP status and the API's own error text (``get_book: HTTP 404: book not found``).

Cookies: the shared client keeps no cookie jar, so a ``Set-Cookie`` never logs in a later call of
another run or another API. A collection whose spec declares cookies (a cookie parameter or a
cookie API key) gets a jar of its own for the length of one run: a login call's session cookie is
then sent on that run's later calls to the same host of that API, and forgotten afterwards.

Nothing from the sandbox is trusted: ``call`` takes plain values that came out of a JSON frame
and re-validates all of them, so a forged frame gets exactly the checks a stub call gets.
"""

from __future__ import annotations

import base64
import heapq
import json
import os
import re
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from protocols.errors import ToolError
from protocols.model import Collection, Tool
from sandbox.api import Limits, ToolCall, Toolset
from sandbox.redact import Redactor

if TYPE_CHECKING:  # imported when the first call is made: a run without calls never pays for them
    import httpx

__all__ = ["Gateway", "CallOutcome", "validator_for", "shared_client"]

_BAD_CHARS = ("\r", "\n", "\x00")
#: Headers that frame a request or steer its connection; never taken from a program's arguments.
_FRAMING_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade",
                              "te", "trailer", "expect", "proxy-connection"})
#: Deepest nesting of a JSON response the gateway hands on (deeper data overflows recursive code).
MAX_RESPONSE_DEPTH = 200
_VALIDATORS: dict[int, tuple[dict[str, Any], Any]] = {}
_VALIDATORS_LOCK = threading.Lock()
_CLIENT: httpx.Client | None = None
_CLIENT_LOCK = threading.Lock()
_LOADED: list[bool] = []  # non-empty once a gateway of this process has loaded its dependencies


def validator_for(schema: dict[str, Any]) -> Any:
    """The compiled jsonschema validator of a parameters schema, built once per schema object.

    Keyed by identity (a Tool keeps its schema dict alive, and the entry holds it too, so the id
    cannot be reused while cached)."""
    key = id(schema)
    hit = _VALIDATORS.get(key)
    if hit is not None and hit[0] is schema:
        return hit[1]
    import jsonschema

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    validator = _safe_validator_class(cls)(schema)
    with _VALIDATORS_LOCK:
        if len(_VALIDATORS) > 4096:
            _VALIDATORS.clear()
        _VALIDATORS[key] = (schema, validator)
    return validator


_SAFE_CLASSES: dict[Any, Any] = {}
#: Longest array whose ``uniqueItems`` the gateway checks (jsonschema compares objects pairwise).
MAX_UNIQUE_CHECK = 500


def _skip_pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> None:
    return None


def _safe_validator_class(cls: Any) -> Any:
    """``cls`` without the checks whose cost a program could blow up on the host, where ``re`` and
    the pairwise comparison cannot be interrupted by any timeout: ``pattern`` is ignored (a spec
    regex like ``^(a+)+$`` backtracks exponentially on a string the program chose) and
    ``uniqueItems`` is checked on short arrays only (quadratic on arrays of objects). The API
    still enforces both itself."""
    safe = _SAFE_CLASSES.get(cls)
    if safe is None:
        import jsonschema

        unique = cls.VALIDATORS.get("uniqueItems")

        def bounded_unique(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
            if unique is None or (isinstance(instance, list) and len(instance) > MAX_UNIQUE_CHECK):
                return None
            return unique(validator, value, instance, schema)

        safe = _SAFE_CLASSES[cls] = jsonschema.validators.extend(
            cls, {"pattern": _skip_pattern, "uniqueItems": bounded_unique})
    return safe


def _no_cookies() -> Any:
    """A cookie jar that keeps nothing. The shared client serves every run and every API of the
    process: a cookie one response sets must not ride along on anyone else's request. (Made with
    the client: ``http.cookiejar`` costs as much to import as httpx itself.)"""
    from http.cookiejar import CookieJar

    class NoCookies(CookieJar):
        def set_cookie(self, cookie: Any) -> None:
            return None

        def extract_cookies(self, response: Any, request: Any) -> None:
            return None

    return NoCookies()


def shared_client() -> httpx.Client:
    """The process-wide HTTP client of gateways that were not given one (connection reuse; no
    cookie jar, see ``_no_cookies``). Its transport makes the TLS side on the first ``https``
    request (``_scheme_router``)."""
    global _CLIENT
    with _CLIENT_LOCK:
        if _CLIENT is None:
            import httpx

            limits = httpx.Limits(max_connections=64, max_keepalive_connections=32)
            _CLIENT = httpx.Client(follow_redirects=False, trust_env=False, cookies=_no_cookies(),
                                   transport=_scheme_router(limits))
        return _CLIENT


def _scheme_router(limits: httpx.Limits) -> httpx.BaseTransport:
    """A transport with one connection pool per scheme, the ``https`` one made on first use.

    httpx loads the certificate store when a transport is made (about 0.1 s), which a command that
    calls only local ``http`` APIs (``atc mock``, a server on 127.0.0.1) never needs. ``https`` is
    verified exactly as httpx's default transport does; other schemes are refused. (Defined here
    because httpx is imported only once a call is made.)"""
    import httpx

    class Router(httpx.BaseTransport):
        def __init__(self) -> None:
            # verify=False only skips loading certificates: this pool never sees https.
            self._plain = httpx.HTTPTransport(verify=False, limits=limits, trust_env=False)
            self._tls: httpx.HTTPTransport | None = None
            self._lock = threading.Lock()

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            if request.url.scheme == "http":
                return self._plain.handle_request(request)
            if request.url.scheme != "https":
                raise httpx.UnsupportedProtocol(f"unsupported URL scheme {request.url.scheme!r}",
                                                request=request)
            with self._lock:
                if self._tls is None:
                    self._tls = httpx.HTTPTransport(limits=limits, trust_env=False)
            return self._tls.handle_request(request)

        def close(self) -> None:
            self._plain.close()
            with self._lock:
                if self._tls is not None:
                    self._tls.close()

    return Router()


def uses_cookies(collection: Collection) -> bool:
    """Does the spec declare cookies (a cookie parameter, or an API key sent as a cookie)? Only such
    a collection gets a per-run cookie jar."""
    if any(s.location == "cookie" for s in collection.security_schemes.values() if s.type == "apiKey"):
        return True
    return any(b.location == "cookie" for t in collection.tools for b in t.bindings.values())


@dataclass
class CallOutcome:
    """What the runner gets back for one call: ``data`` when ``ok``, else ``error`` =
    ``{"message", "status", "kind"}`` with kind ``ToolError`` or ``CallBudget``."""

    ok: bool
    data: Any = None
    error: dict[str, Any] | None = None

    def frame(self, call_id: int) -> dict[str, Any]:
        if self.ok:
            return {"op": "result", "id": call_id, "ok": True, "data": self.data}
        return {"op": "result", "id": call_id, "ok": False, "error": self.error}


#: Fields that carry an API's specific account of an error, most specific first; ``error``,
#: ``title`` and ``code`` are usually generic labels ("Unauthorized", "Bad Request").
_SPECIFIC_KEYS = ("message", "detail", "details", "error_description", "error_message", "errorMessage",
                  "msg", "description", "reason")
_GENERIC_KEYS = ("error", "title", "status_message", "code")


def _error_words(node: Any, depth: int = 0) -> str | None:
    """The most specific error text in an error body: a specific field, at this level or inside
    ``error``/``errors`` (``{"error": {"message": ...}}``, ``{"errors": [{"detail": ...}]}``), before
    a generic label."""
    if depth > 3:
        return None
    if isinstance(node, str):
        return node.strip() or None
    if isinstance(node, list):
        texts = [t for t in (_error_words(x, depth + 1) for x in node[:5]) if t]
        return "; ".join(dict.fromkeys(texts)) or None
    if not isinstance(node, dict):
        return None
    where = node.get("loc")
    if isinstance(node.get("msg"), str) and isinstance(where, list):  # pydantic/FastAPI validation errors
        return f"{'.'.join(str(x) for x in where)}: {node['msg']}"
    for key in _SPECIFIC_KEYS:
        value = node.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, dict | list):
            found = _error_words(value, depth + 1)
            if found:
                return found
    for key in ("error", "errors"):
        inner = node.get(key)
        if isinstance(inner, dict | list):
            found = _error_words(inner, depth + 1)
            if found:
                return found
    for key in _GENERIC_KEYS:
        value = node.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _api_error_text(body: Any) -> str:
    """The API's own words for an error response, short (see ``_error_words``)."""
    if isinstance(body, dict | list):
        found = _error_words(body)
        if found:
            return " ".join(found.split())[:300]
    if body is None or body == "":
        return "(empty body)"
    text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
    text = " ".join(text.split())
    return text[:300] + ("..." if len(text) > 300 else "")


def _wire_str(value: Any) -> str:
    """A parameter value as it appears in a path, query, header or cookie."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return "" if value is None else str(value)


def _encode_segment(value: str) -> str:
    """Percent-encode one path segment so that it stays one segment: ``/`` is encoded and a
    segment made only of dots (``.``/``..``) is encoded too, because clients and servers remove
    literal dot segments."""
    encoded = quote(value, safe="")
    if encoded.strip(".") == "":
        encoded = encoded.replace(".", "%2E")
    return encoded


class Gateway:
    """Serves the tool calls of ONE program run and records them in ``calls``.

    ``client`` is shared between gateways for connection reuse (default: ``shared_client()``);
    ``environ`` is where credentials are read (default: ``os.environ`` of the host);
    ``deadline`` (a ``time.monotonic()`` value) caps each call's timeout by the program's end.
    Thread-safe: the budget counter and the call log are guarded, so calls may be served from
    several threads (the session serves a runner's calls one by one, in arrival order).
    """

    def __init__(
        self,
        toolset: Toolset,
        limits: Limits | None = None,
        *,
        client: httpx.Client | None = None,
        environ: Mapping[str, str] | None = None,
        deadline: float | None = None,
    ) -> None:
        self.toolset = toolset
        self.limits = limits or Limits()
        self._client = client
        self.environ = os.environ if environ is None else environ
        self.deadline = deadline
        self.calls: list[ToolCall] = []
        self.budget_exceeded = False
        self._attempts = 0
        self._lock = threading.Lock()
        self._redactor: Redactor | None = None
        # collection -> host -> cookie name -> value; only for collections that declare cookies.
        self._jars: dict[str, dict[str, dict[str, str]]] = {}

    @property
    def client(self) -> httpx.Client:
        """The HTTP client: the one given, else ``shared_client()`` (made when first needed)."""
        if self._client is None:
            self._client = shared_client()
        return self._client

    # -- the one entry point ------------------------------------------------------------------

    def call(self, tool: Any, args: Any, *, line: Any = None, col: Any = None) -> CallOutcome:
        """Serve one call (never raises for anything the program sent)."""
        if not _LOADED:
            self._load()
        line = line if isinstance(line, int) and not isinstance(line, bool) else None
        col = col if isinstance(col, int) and not isinstance(col, bool) else None
        name = tool if isinstance(tool, str) else repr(tool)[:80]
        started = time.perf_counter()
        spec = self.toolset.tools.get(name) if isinstance(tool, str) else None
        record = ToolCall(tool=name, args=args if isinstance(args, dict) else {"_": args},
                          method=spec.method.upper() if spec else "", path=spec.path if spec else "",
                          status=None, ok=False, line=line, duration_ms=0.0, col=col)
        with self._lock:
            self._attempts += 1
            over = self._attempts > self.limits.max_calls
            if over:
                self.budget_exceeded = True
        try:
            if over:
                message = (f"{name}: call budget exhausted: the program may make at most "
                           f"{self.limits.max_calls} tool calls")
                record.error = message
                return CallOutcome(False, error={"message": message, "status": None, "kind": "CallBudget"})
            if spec is None:
                raise ToolError(f"{name}: no such tool", tool=name)
            if not isinstance(args, dict) or not all(isinstance(k, str) for k in args):
                raise ToolError(f"{name}: arguments must be keyword arguments", tool=name)
            self._validate(spec, args)
            status, body, raw = self._send(spec, args)
            body, record.redacted = self._scrub(body, raw)
            record.status, record.response = status, body
            if status >= 400:
                raise ToolError(f"{name}: HTTP {status}: {_api_error_text(body)}", tool=name, status=status)
            record.ok = True
            return CallOutcome(True, data=body)
        except ToolError as exc:
            message = self._scrub_text(exc.message, record)
            record.error = message
            record.status = record.status if record.status is not None else exc.status
            return CallOutcome(False, error={"message": message, "status": exc.status, "kind": "ToolError"})
        except Exception as exc:
            # Arguments that passed validation can still fail to encode (e.g. a float that is not
            # JSON); that is the call's failure, not the host's: the run must go on and report it.
            message = self._scrub_text(
                f"{name}: the request could not be made: {type(exc).__name__}: {str(exc)[:200]}", record)
            record.error = message
            return CallOutcome(False, error={"message": message, "status": None, "kind": "ToolError"})
        finally:
            record.duration_ms = (time.perf_counter() - started) * 1000
            with self._lock:
                self.calls.append(record)

    def _load(self) -> None:
        """Import what serving calls takes (jsonschema, httpx) and make the client, once per
        process and before a call's clock starts: a run that makes no call never pays for them,
        and the first call's ``duration_ms`` is the call's own."""
        import httpx  # noqa: F401
        import jsonschema  # noqa: F401

        _ = self.client
        _LOADED.append(True)

    # -- secrets --------------------------------------------------------------------------------

    def redactor(self) -> Redactor:
        """Every credential value this run may add (read on the host when first needed)."""
        if self._redactor is None:
            values = [self.environ.get(self._env_var(scheme)) for scheme in self.toolset.credentials]
            self._redactor = Redactor(v for v in values if v)
        return self._redactor

    def _scrub(self, body: Any, raw: bytes) -> tuple[Any, int]:
        redactor = self.redactor()
        if not redactor or body is None or not redactor.may_hold(raw):
            return body, 0
        return redactor.data(body)

    def _scrub_text(self, text: str, record: ToolCall) -> str:
        redactor = self.redactor()
        if not redactor:
            return text
        text, n = redactor.text(text)
        record.redacted += n
        return text

    # -- validation ---------------------------------------------------------------------------

    def _validate(self, tool: Tool, args: dict[str, Any]) -> None:
        props = tool.properties
        allowed = sorted(props)
        for key in args:
            if props and key not in props or not props and tool.parameters.get("additionalProperties") is False:
                expected = ", ".join(allowed) if allowed else "no arguments"
                raise ToolError(f"{tool.name}: unknown argument {key!r} (expected: {expected})",
                                tool=tool.name, parameter=key)
        for key in tool.required:
            if key not in args:
                raise ToolError(f"{tool.name}: missing required argument {key!r}", tool=tool.name, parameter=key)
        validator = validator_for(tool.parameters)
        import jsonschema

        error = jsonschema.exceptions.best_match(validator.iter_errors(args))
        if error is not None:
            param = str(error.absolute_path[0]) if error.absolute_path else None
            where = f"argument {param!r}: " if param else ""
            raise ToolError(f"{tool.name}: {where}{error.message}", tool=tool.name, parameter=param)

    # -- the request --------------------------------------------------------------------------

    def _base_url(self, tool: Tool) -> str:
        collection = self.toolset.collection_of(tool.name)
        candidates = [self.toolset.base_url] if self.toolset.base_url else (tool.servers or collection.servers)
        base = next((s for s in candidates if s), None)
        if not base:
            raise ToolError(f"{tool.name}: the spec names no server URL", tool=tool.name,
                            hint="pass --base-url URL")
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ToolError(f"{tool.name}: server URL {base!r} is not an absolute http(s) URL", tool=tool.name,
                            hint="pass --base-url URL")
        return base.rstrip("/")

    def _check_text(self, tool: Tool, param: str, value: str) -> str:
        if any(c in value for c in _BAD_CHARS):
            raise ToolError(f"{tool.name}: argument {param!r} must not contain CR, LF or NUL characters",
                            tool=tool.name, parameter=param)
        return value

    def _build(self, tool: Tool, args: dict[str, Any]) -> dict[str, Any]:
        path = tool.path
        query: list[tuple[str, str]] = []
        headers: dict[str, str] = {}
        cookies: list[str] = []
        body: Any = None
        has_body = False
        for key, value in args.items():
            binding = tool.bindings.get(key)
            location = binding.location if binding else ("body" if tool.body_media_type else "query")
            wire = binding.name if binding else key
            if location == "path":
                text = _wire_str(value)
                if text == "":
                    raise ToolError(f"{tool.name}: path argument {key!r} must not be empty",
                                    tool=tool.name, parameter=key)
                path = path.replace("{" + wire + "}", _encode_segment(text))
            elif location == "query":
                for item in value if isinstance(value, list) else [value]:
                    query.append((wire, self._check_text(tool, key, _wire_str(item))))
            elif location == "header":
                if wire.lower() in _FRAMING_HEADERS:
                    # These decide where a request ends on a shared keep-alive connection: a
                    # program setting them could smuggle a second request past the gateway.
                    raise ToolError(f"{tool.name}: argument {key!r} would set the {wire} header, which the "
                                    "gateway does not let programs set", tool=tool.name, parameter=key)
                headers[wire] = self._check_text(tool, key, _wire_str(value))
            elif location == "cookie":
                text = self._check_text(tool, key, _wire_str(value))
                if ";" in text:
                    raise ToolError(f"{tool.name}: cookie argument {key!r} must not contain ';'",
                                    tool=tool.name, parameter=key)
                cookies.append(f"{wire}={text}")
            else:
                has_body = True
                if wire == "":
                    body = value
                else:
                    body = body if isinstance(body, dict) else {}
                    body[wire] = value
        unfilled = re.search(r"\{([^{}/]+)\}", path)
        if unfilled:
            raise ToolError(f"{tool.name}: missing path argument {unfilled.group(1)!r}", tool=tool.name,
                            parameter=unfilled.group(1))
        self._add_credentials(tool, headers, query, cookies)
        base = self._base_url(tool)
        jar = self._jar(tool, base)
        if jar:
            # The run's session cookies first; a cookie the call sets itself wins over one of the same name.
            explicit = {c.split("=", 1)[0] for c in cookies}
            cookies = [f"{k}={v}" for k, v in jar.items() if k not in explicit] + cookies
        if cookies:
            headers["Cookie"] = "; ".join(cookies)
        request: dict[str, Any] = {"method": tool.method.upper(), "url": base + path,
                                   "params": query, "headers": headers}
        if has_body:
            media = tool.body_media_type or "application/json"
            if "form" in media and isinstance(body, dict):
                request["data"] = {k: _wire_str(v) for k, v in body.items()}
            elif media.startswith("text/") and isinstance(body, str):
                request["content"] = body.encode()
                headers["Content-Type"] = media
            else:
                request["json"] = body
        return request

    def _jar(self, tool: Tool, base: str) -> dict[str, str] | None:
        """The run's cookies for ``tool``'s API at the host of ``base`` (None: this API keeps none)."""
        collection = self.toolset.collection_of(tool.name)
        jars = self._jars.get(collection.name)
        if jars is None:
            if not uses_cookies(collection):
                return None
            jars = self._jars[collection.name] = {}
        return jars.setdefault(urlsplit(base).netloc.lower(), {})

    def _keep_cookies(self, tool: Tool, response: httpx.Response) -> None:
        """Remember what a response of a cookie-declaring API set, for this run's later calls."""
        jar = self._jar(tool, str(response.url))
        if jar is None:
            return
        for cookie in response.cookies.jar:
            if cookie.value is None or cookie.is_expired():
                jar.pop(cookie.name, None)
            else:
                jar[cookie.name] = cookie.value

    def _env_var(self, scheme: str) -> str:
        source = self.toolset.credentials[scheme]
        return source[4:] if source.startswith("env:") else source

    def _env_value(self, scheme: str) -> str | None:
        return self.environ.get(self._env_var(scheme))

    def _secret(self, tool: Tool, scheme: str) -> str:
        var = self._env_var(scheme)
        value = self.environ.get(var)
        if value is None:
            raise ToolError(f"{tool.name}: credential {scheme!r}: environment variable {var} is not set",
                            tool=tool.name, hint=f"export {var}=... on the host")
        return value

    def _add_credentials(self, tool: Tool, headers: dict[str, str], query: list[tuple[str, str]],
                         cookies: list[str]) -> None:
        collection: Collection = self.toolset.collection_of(tool.name)
        given = self.toolset.credentials
        declared = bool(tool.security)
        # Many specs (RapidAPI ones above all) declare no security although the API wants a key:
        # then every credential given for the collection is sent, and one whose variable is unset
        # is skipped rather than failing a tool that may not need it. A declared requirement is
        # strict: its secret must be there.
        alternatives = tool.security or [[s for s in collection.security_schemes if s in given]]
        chosen = next((alt for alt in alternatives if alt and all(s in given for s in alt)), None)
        for scheme_name in chosen or []:
            scheme = collection.security_schemes.get(scheme_name)
            if scheme is None or (not declared and self._env_value(scheme_name) is None):
                continue
            secret = self._check_text(tool, scheme_name, self._secret(tool, scheme_name))
            if scheme.type == "apiKey" and scheme.param:
                if scheme.location == "query":
                    query.append((scheme.param, secret))
                elif scheme.location == "cookie":
                    cookies.append(f"{scheme.param}={secret}")
                else:
                    headers[scheme.param] = secret
            elif scheme.type == "http" and (scheme.scheme or "").lower() == "basic":
                token = secret if ":" not in secret else base64.b64encode(secret.encode()).decode()
                headers["Authorization"] = f"Basic {token}"
            elif scheme.type == "http" and scheme.scheme and scheme.scheme.lower() != "bearer":
                headers["Authorization"] = f"{scheme.scheme} {secret}"
            else:
                headers["Authorization"] = f"Bearer {secret}"

    def _timeout(self) -> float:
        timeout = self.limits.call_timeout
        if self.deadline is not None:
            timeout = min(timeout, max(0.05, self.deadline - time.monotonic()))
        return timeout

    def _send(self, tool: Tool, args: dict[str, Any]) -> tuple[int, Any, bytes]:
        """(status, decoded body, raw body) of the call's HTTP exchange."""
        import httpx

        request = self._build(tool, args)
        timeout = self._timeout()
        end = time.monotonic() + timeout
        cap = self.limits.max_response_bytes
        token = None
        try:
            with self.client.stream(**request, timeout=timeout) as response:
                # httpx's timeouts are per read: a server dripping a byte at a time would hold the
                # call, and the whole run, open for ever. The watchdog cuts the body off at ``end``.
                token = _WATCHDOG.arm(end, response)
                chunks: list[bytes] = []
                size = 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > cap:
                        raise ToolError(f"{tool.name}: response larger than the {cap}-byte cap",
                                        tool=tool.name, status=response.status_code)
                    if time.monotonic() > end:
                        raise httpx.ReadTimeout("the response body did not end in time")
                    chunks.append(chunk)
                if _WATCHDOG.disarm(token):
                    raise httpx.ReadTimeout("the response body did not end in time")
                token = None
                raw = b"".join(chunks)
                content_type = response.headers.get("content-type", "")
                status = response.status_code
                if "set-cookie" in response.headers:
                    self._keep_cookies(tool, response)
        except httpx.TimeoutException as exc:
            raise ToolError(f"{tool.name}: no response within {timeout:.1f} s", tool=tool.name) from exc
        except httpx.HTTPError as exc:
            if token is not None and _WATCHDOG.disarm(token):
                raise ToolError(f"{tool.name}: no response within {timeout:.1f} s", tool=tool.name) from exc
            raise ToolError(f"{tool.name}: request failed: {type(exc).__name__}: {exc}", tool=tool.name) from exc
        finally:
            if token is not None:
                _WATCHDOG.disarm(token)
        try:
            return status, _decode(raw, content_type), raw
        except ValueError as exc:
            raise ToolError(f"{tool.name}: {exc}", tool=tool.name, status=status) from None


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


def _decode(raw: bytes, content_type: str) -> Any:
    """JSON data when the body is JSON (declared or not), else text; ``None`` for no body.

    A response is the outside world's data, so it is made safe for the host's own JSON output:
    ``NaN``/``Infinity`` (not JSON, though Python emits them) become ``None``, lone surrogate
    escapes become U+FFFD, and data nested too deeply to process is refused (``ValueError``)."""
    if not raw.strip():
        return None
    if "json" in content_type or raw.lstrip()[:1] in (b"{", b"["):
        try:
            data = json.loads(raw, parse_constant=lambda _name: None)
        except RecursionError:
            raise ValueError(f"the response is nested more than {MAX_RESPONSE_DEPTH} levels deep") from None
        except ValueError:
            pass
        else:
            has_escapes = b"\\u" in raw
            if not has_escapes and raw.count(b"[") + raw.count(b"{") < MAX_RESPONSE_DEPTH:
                return data
            return _clean(data, has_escapes=has_escapes)
    return raw.decode("utf-8", errors="replace")


def _clean(data: Any, *, has_escapes: bool) -> Any:
    """``data`` after checking its depth and replacing lone surrogates (only ``\\u`` escapes can
    make them). Iterative; skipped for data that cannot be deep and has no escapes."""
    if isinstance(data, str):
        return _repair(data) if has_escapes else data
    if not isinstance(data, dict | list):
        return data
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_RESPONSE_DEPTH:
            raise ValueError(f"the response is nested more than {MAX_RESPONSE_DEPTH} levels deep")
        if isinstance(item, dict) and has_escapes and not all(map(_printable, item)):
            fixed = {_repair(k): v for k, v in item.items()}
            item.clear()
            item.update(fixed)
        for key, value in item.items() if isinstance(item, dict) else enumerate(item):
            if isinstance(value, str):
                if has_escapes and not _printable(value):
                    item[key] = _repair(value)
            elif isinstance(value, dict | list):
                stack.append((value, depth + 1))
    return data


def _printable(text: str) -> bool:
    """Can ``text`` be written as UTF-8 (no lone surrogates)?"""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _repair(text: str) -> str:
    return text if _printable(text) else "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
