"""A 127.0.0.1 server that behaves like the real APIs of issue #7, for the real-APIs tests.

Each route does what some real server does (the comments say which kind):

- ``/echo...``: the request as the server saw it: method, raw request target (before any
  decoding), headers, body (an HTTP test service does this);
- ``/q/STYLE``, ``/p/STYLE/...``, ``/h``, ``/c``, ``/form``, ``/multipart``: strict parsers of each
  OpenAPI parameter style. They split the RAW text on the style's delimiter and only then
  percent-decode each piece, as a careful server does, so a test passes only if the delimiters
  are literal and the values encoded;
- ``/pages/items``: 7 records, ``per_page`` at a time, with ``Link``, ``X-Total-Count`` and
  ``ETag`` headers (GitHub-style paging);
- ``/go/...``: redirects: same-origin 301/302/303/307/308, to another origin, to ``file:``, a
  loop, no Location, and a login wall (a notebook server sends anonymous callers to ``/login``);
- ``/bin/...``, ``/enc/...``, ``/bomb/...``: binary and latin-1 bodies, gzip/deflate/brotli/zstd
  bodies, an encoding nobody decodes, and compression bombs (small on the wire, huge decoded);
- ``/auth/KIND``: wants the secret in a header, query, cookie, bearer or basic credential and
  quotes a wrong one back in its error (as real APIs do);
- ``/contents/{path}``: a file API whose root is the empty path (``/contents/``);
- ``/slow?s=N``: answers after N seconds;
- ``/files/NAME``: whatever a test put in ``files`` (a spec served at a URL), behind
  ``Authorization: token SECRET`` when the name starts with ``private``.

Every request is recorded (``requests``: method, raw target, headers, body).
"""

from __future__ import annotations

import base64
import gzip
import json
import threading
import time
import zlib
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

SECRET = "rw-secret-4b5c6d7e"
BASIC = "ada:pa55-w0rd-x"
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360f8ffff3f0005fe02fea7d68b2c0000000049454e44ae426082")
RECORDS = [{"id": i, "name": f"item {i}"} for i in range(1, 8)]
FILES = {"notes.txt": "hello", "dir/inner.txt": "deep"}


def _raw_pairs(query: str) -> list[tuple[str, str]]:
    """The raw (still encoded) name/value pairs of a query string."""
    return [tuple(p.split("=", 1)) if "=" in p else (p, "") for p in query.split("&") if p]  # type: ignore[misc]


def parse_query_style(style: str, query: str) -> dict[str, Any]:
    """What a strict server reads from ``query`` for parameters in ``style``."""
    pairs = _raw_pairs(query)
    out: dict[str, Any] = {}
    if style == "deepObject":
        for raw_name, raw_value in pairs:
            name = unquote(raw_name)
            head, _, rest = name.partition("[")
            node = out.setdefault(head, {})
            keys = [k.rstrip("]") for k in rest.split("[")] if rest else []
            for key in keys[:-1]:
                node = node.setdefault(key, {})
            node[keys[-1] if keys else ""] = unquote(raw_value)
        return out
    delimiter = {"form": ",", "spaceDelimited": "%20", "pipeDelimited": "|", "tabDelimited": "%09"}.get(style)
    for raw_name, raw_value in pairs:
        name = unquote(raw_name)
        if style == "form-explode" or delimiter is None:
            out.setdefault(name, []).append(unquote(raw_value))
        else:
            out.setdefault(name, []).extend(unquote(v) for v in raw_value.split(delimiter))
    return out


def parse_path_style(style: str, segment: str) -> Any:
    """What a strict server reads from one path segment in ``style`` (``simple``, ``label``,
    ``matrix``), as a list of decoded items (``k=v`` items stay as they are)."""
    if style == "label":
        if not segment.startswith("."):
            return {"error": "label values start with '.'"}
        body = segment[1:]
        return [unquote(v) for v in body.replace(".", ",").split(",")] if body else []
    if style == "matrix":
        if not segment.startswith(";"):
            return {"error": "matrix values start with ';'"}
        items: list[str] = []
        for part in segment[1:].split(";"):
            key, _, value = part.partition("=")
            items.append(f"{unquote(key)}=" + ",".join(unquote(v) for v in value.split(",")))
        return items
    return [unquote(v) for v in segment.split(",")]


def parse_multipart(content_type: str, body: bytes) -> list[dict[str, Any]]:
    message = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
    parts = []
    for part in message.iter_parts():
        payload = part.get_payload(decode=True) or b""
        parts.append({"name": part.get_param("name", header="content-disposition"),
                      "filename": part.get_filename(), "content_type": part.get_content_type()
                      if part.get("content-type") else None, "b64": base64.b64encode(payload).decode()})
    return parts


@cache
def bomb(kind: str, size: int = 64 * 1024 * 1024) -> bytes:
    """``size`` zero bytes, compressed: tiny on the wire."""
    zeros = bytes(size)
    if kind == "gzip":
        return gzip.compress(zeros, compresslevel=9)
    if kind == "br":
        import brotli

        return bytes(brotli.compress(zeros, quality=5))
    import zstandard

    return bytes(zstandard.ZstdCompressor(level=3).compress(zeros))


def _compress(kind: str, data: bytes) -> bytes:
    if kind == "gzip":
        return gzip.compress(data)
    if kind == "deflate":
        return zlib.compress(data)
    if kind == "rawdeflate":
        c = zlib.compressobj(wbits=-15)
        return c.compress(data) + c.flush()
    if kind == "br":
        import brotli

        return bytes(brotli.compress(data))
    if kind == "zstd":
        import zstandard

        return bytes(zstandard.ZstdCompressor().compress(data))
    return data


@dataclass
class Seen:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes


@dataclass
class RealWorld:
    """The server (``start``/``stop``); ``other`` is a second origin a redirect may point to."""

    requests: list[Seen] = field(default_factory=list)
    other: str = "http://127.0.0.2:9"
    files: dict[str, tuple[Any, ...]] = field(default_factory=dict)  # name -> (body, type[, headers])
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> RealWorld:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *a: Any) -> None:
                pass

            def send(self, status: int, body: bytes = b"", ctype: str = "application/json",
                     headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                if body or status not in (204, 304):
                    self.send_header("Content-Type", ctype)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
                self.send(status, json.dumps(obj).encode(), headers=headers)

            def handle_any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                seen = Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                api.requests.append(seen)
                parts = urlsplit(self.path)
                path, query = parts.path, parts.query
                try:
                    self.route(path, query, seen)
                except BrokenPipeError:
                    pass

            def route(self, path: str, query: str, seen: Seen) -> None:
                if path.startswith("/echo"):
                    return self.json(200, {"method": seen.method, "target": seen.target, "headers": seen.headers,
                                           "body": seen.body.decode("utf-8", "replace"),
                                           "body_b64": base64.b64encode(seen.body).decode()})
                if path.startswith("/q/"):
                    return self.json(200, parse_query_style(path[3:], query))
                if path.startswith("/p/"):
                    style, _, rest = path[3:].partition("/")
                    return self.json(200, {"items": parse_path_style(style, rest.split("/")[0])})
                if path == "/h":
                    ids = seen.headers.get("x-ids", "")
                    obj = seen.headers.get("x-obj", "")
                    return self.json(200, {"ids": ids.split(",") if ids else [],
                                           "obj": dict(p.split("=", 1) for p in obj.split(",") if "=" in p)})
                if path == "/c":
                    cookies = [c.strip().split("=", 1) for c in seen.headers.get("cookie", "").split(";") if c.strip()]
                    return self.json(200, {"cookies": cookies})
                if path == "/form":
                    return self.json(200, {"content_type": seen.headers.get("content-type"),
                                           "pairs": [[unquote(k.replace("+", " ")), unquote(v.replace("+", " "))]
                                                     for k, v in _raw_pairs(seen.body.decode())]})
                if path == "/multipart":
                    return self.json(200, {"parts": parse_multipart(seen.headers.get("content-type", ""),
                                                                    seen.body)})
                if path == "/pages/items":
                    args = dict(_raw_pairs(query))
                    page, per = int(args.get("page", "1")), int(args.get("per_page", "3"))
                    chunk = RECORDS[(page - 1) * per: page * per]
                    last = (len(RECORDS) + per - 1) // per
                    links = []
                    if page < last:
                        links.append(f'<{api.url}/pages/items?page={page + 1}&per_page={per}>; rel="next"')
                    links.append(f'<{api.url}/pages/items?page={last}&per_page={per}>; rel="last"')
                    return self.json(200, chunk, headers={"Link": ", ".join(links), "X-Total-Count": str(len(RECORDS)),
                                                          "ETag": f'"p{page}"'})
                if path.startswith("/go/"):
                    return self.redirect(path[4:], query, seen)
                if path == "/result":
                    return self.json(200, {"method": seen.method, "body": seen.body.decode()})
                if path == "/login":
                    return self.send(200, b"<html><body>Log in</body></html>", "text/html")
                if path == "/bin/png":
                    return self.send(200, PNG, "image/png")
                if path == "/bin/octet":
                    return self.send(200, bytes(range(256)), "application/octet-stream")
                if path == "/bin/latin1":
                    return self.send(200, "café à la crème".encode("latin-1"), "text/plain; charset=iso-8859-1")
                if path.startswith("/enc/"):
                    kind = path[5:]
                    size = int(dict(_raw_pairs(query)).get("n", "50"))
                    data = json.dumps({"ok": True, "encoding": kind, "text": "ü" * size}).encode()
                    coding = {"rawdeflate": "deflate"}.get(kind, kind)
                    return self.send(200, _compress(kind, data), headers={"Content-Encoding": coding})
                if path.startswith("/bomb/"):
                    kind = path[6:]
                    return self.send(200, bomb(kind), headers={"Content-Encoding": kind})
                if path.startswith("/auth/"):
                    return self.auth(path[6:], query, seen)
                if path.startswith("/contents"):
                    rest = path[len("/contents"):]
                    if rest in ("", "/"):
                        return self.json(200, {"path": "", "type": "directory", "content": sorted(FILES)})
                    name = unquote(rest[1:])
                    if name in FILES:
                        return self.json(200, {"path": name, "type": "file", "content": FILES[name]})
                    return self.json(404, {"message": f"file or directory {name!r} does not exist"})
                if path.startswith("/files/"):
                    name = path[len("/files/"):]
                    if name.startswith("private") and seen.headers.get("authorization") != f"token {SECRET}":
                        return self.send(302, b"", headers={"Location": f"/login?next=/files/{name}"})
                    if name not in api.files:
                        return self.json(404, {"message": "no such file"})
                    content, ctype, *extra = api.files[name]
                    return self.send(200, content, ctype, extra[0] if extra else None)
                if path == "/slow":
                    time.sleep(float(dict(_raw_pairs(query)).get("s", "2")))
                    return self.json(200, {"slow": True})
                return self.json(404, {"message": f"no route {path}"})

            def redirect(self, kind: str, query: str, seen: Seen) -> None:
                codes = {"301": 301, "302": 302, "303": 303, "307": 307, "308": 308}
                if kind in codes:
                    return self.send(codes[kind], b"Redirecting...", "text/html", {"Location": "/result"})
                if kind == "relative-chain":
                    return self.send(302, b"", headers={"Location": "/go/302"})
                if kind == "offsite":
                    return self.send(302, b"", headers={"Location": f"{api.other}/stolen?from=offsite"})
                if kind == "file":
                    return self.send(302, b"", headers={"Location": "file:///etc/passwd"})
                if kind == "loop":
                    return self.send(302, b"", headers={"Location": "/go/loop"})
                if kind == "nowhere":
                    return self.send(302, b"Moved", "text/plain")
                if kind == "login-wall":
                    if seen.headers.get("authorization") == f"token {SECRET}":
                        return self.json(200, {"spec": "yes"})
                    return self.send(302, b"", headers={"Location": "/login?next=%2Fgo%2Flogin-wall"})
                if kind == "login-cookie":
                    # a login that sets its session cookie on the redirect to the page that needs it
                    return self.send(302, b"", headers={"Location": "/go/whoami", "Set-Cookie": "sid=s-42; Path=/"})
                if kind == "whoami":
                    if "sid=s-42" in seen.headers.get("cookie", ""):
                        return self.json(200, {"user": "ada"})
                    return self.json(401, {"message": "no session"})
                if kind == "keyed":
                    # Location echoes the query key, as some APIs do
                    return self.send(302, b"", headers={"Location": f"/result?{query}"})
                return self.json(404, {"message": "no such redirect"})

            def auth(self, kind: str, query: str, seen: Seen) -> None:
                given = {
                    "header": seen.headers.get("authorization", ""),
                    "query": unquote(dict(_raw_pairs(query)).get("token", "")),
                    "cookie": next((c.split("=", 1)[1] for c in seen.headers.get("cookie", "").split("; ")
                                    if c.startswith("sid=")), ""),
                    "bearer": seen.headers.get("authorization", ""),
                    "basic": seen.headers.get("authorization", ""),
                }.get(kind, "")
                wanted = {"header": f"token {SECRET}", "query": SECRET, "cookie": SECRET,
                          "bearer": f"Bearer {SECRET}",
                          "basic": "Basic " + base64.b64encode(BASIC.encode()).decode()}.get(kind)
                if given == wanted:
                    return self.json(200, {"authorized": kind, "echo": given})
                return self.json(401, {"error": "Unauthorized", "message": f"bad credential {given!r}"})

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # clients hanging up on purpose (caps, timeouts) is not news

        self._server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
