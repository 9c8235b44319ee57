"""How ``atc mock`` answers: which documented status, which media type, which headers, what bytes.

- **Status.** A success answers the first documented 2xx. A failure answers a status the operation
  documents for that kind of failure (``invalid``: 400, 422; ``not_found``: 404, 410;
  ``unauthorized``: 401, 403; ...), else its ``4XX`` or ``default`` response with the natural
  code, else another documented 4xx (an API that documents only 401/403/429 gets 403 for an unknown
  id rather than an undocumented 404). Only an operation that documents no responses at all gets
  the natural code.
- **Body.** The documented response's schema, generated like any other, with atc's message put
  into the fields the schema allows (``message``, ``detail``, ``error_description``...; a nested
  ``error`` object too). A response documented without content has no body (the message is then
  in the ``X-Atc-Mock-Error`` header); an operation that documents nothing gets atc's own
  ``{"error", "message"}``.
- **Media type.** The documented media types of that response, negotiated with ``Accept`` (406
  when nothing acceptable is documented), and encoded as they say: JSON, text, XML, CSV, a form,
  or bytes of the right kind (a real PNG, JPEG, GIF, WebP, BMP, TIFF, ICO or PDF; a PNG for an
  image type the mock cannot make; seeded bytes for anything else). A documented range is
  answered in a concrete type within it (``image/*`` as ``image/png``, ``*/*`` as JSON). Every
  answer that documents a media type says it in ``Content-Type``, even without a body (a ``204``
  documented with content, a Swagger 2 response without a schema: ``produces`` still applies).
- **Headers.** The response's documented headers, generated from their schemas; and
  ``X-Atc-Mock-Unsatisfiable`` when the answer cannot meet its schema (:mod:`atc.mock.satisfy`).
"""

from __future__ import annotations

import base64
import csv
import io
import json
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode
from xml.sax.saxutils import escape as xml_escape

from atc.mock.entities import as_dict, rng, schema_type
from atc.mock.gen import RequestContext, SchemaFaker
from atc.mock.request_checks import is_valid
from atc.mock.satisfy import HEADER, verdict
from protocols.model import Tool

__all__ = ["MockResponse", "NATURAL", "success_status", "error_status", "documents_not_found", "negotiate", "encode",
           "NOT_ACCEPTABLE", "ErrorMaker", "is_json", "concrete_media", "declared_media", "HEADER"]

#: The status each kind of failure has when the operation documents nothing better.
NATURAL = {"invalid": 400, "unsupported_media": 415, "not_found": 404, "unauthorized": 401,
           "not_acceptable": 406, "conflict": 409, "method_not_allowed": 405}
_PREFERENCES = {
    "invalid": ("400", "422", "4XX"),
    "unsupported_media": ("415", "400", "422", "4XX"),
    "not_found": ("404", "410", "4XX"),
    "unauthorized": ("401", "403", "4XX"),
    "not_acceptable": ("406", "4XX"),
    "conflict": ("409", "400", "422", "4XX"),
}
#: Statuses that say something precise (credentials, rate limits): a last resort for other failures.
_SPECIFIC = ("401", "403", "429")
NOT_ACCEPTABLE = "\x00not acceptable"
#: String fields of an error schema that carry its message, best first.
_MESSAGE_FIELDS = ("message", "error_description", "detail", "details", "status_message", "error_message",
                   "errorMessage", "description", "error", "title", "msg", "reason", "text", "summary")
#: String fields that name the kind of failure (``not_found``, ``invalid``...).
_KIND_FIELDS = ("error", "error_code", "code", "type", "kind")
_CODE_FIELDS = ("status", "status_code", "statusCode", "code", "http_status", "httpStatus")
_PARAM_FIELDS = ("parameter", "param", "field", "pointer", "location")


@dataclass
class MockResponse:
    """An answer. ``body`` is the value a JSON body holds (None: no body); ``data`` the encoded
    bytes when the media type is not JSON; ``media_type`` None when there is no body at all."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    tool: str | None = None
    media_type: str | None = "application/json"
    data: bytes | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "body": self.body, "headers": self.headers, "tool": self.tool,
                "media_type": self.media_type}

    def content(self) -> bytes:
        if self.data is not None:
            return self.data
        if self.media_type is None or self.status in (204, 304) or (self.body is None and self.status >= 300
                                                                    and not is_json(self.media_type)):
            return b""
        return json.dumps(self.body, ensure_ascii=False).encode()


def is_json(media: str | None) -> bool:
    if not media:
        return False
    main = media.split(";")[0].strip().lower()
    return main in ("application/json", "text/json", "*/*", "*", "application/*") or main.endswith("+json")


#: A concrete media type for each documented range the mock answers in.
_CONCRETE = {"*/*": "application/json", "*": "application/json", "application/*": "application/json",
             "image/*": "image/png", "text/*": "text/plain"}


def concrete_media(media: str) -> str:
    """The type an answer in documented ``media`` is sent as: a range (``image/*``) becomes a
    type within it (``image/png``), parameters kept; anything else is itself."""
    main, sep, params = media.partition(";")
    found = _CONCRETE.get(main.strip().lower())
    return found + sep + params if found else media


def declared_media(entry: dict[str, Any], accept: str | None) -> str | None:
    """The media type of a documented answer that has no body: its own documented content
    type, or, for a Swagger 2 response without a schema, one of the operation's ``produces``."""
    content = as_dict(entry.get("content"))
    produces = entry.get("produces")
    offered = content or ({str(m): None for m in produces} if isinstance(produces, list) and produces else {})
    media = negotiate(offered, accept)
    if media == NOT_ACCEPTABLE:
        media = next(iter(offered))
    return concrete_media(media) if media else None


def _documented(tool: Tool) -> list[str]:
    return list(tool.responses) or list(tool.status_codes)


def success_status(tool: Tool) -> str | None:
    """The documented success this operation answers with (the first 2xx, else ``2XX``/``default``)."""
    docs = _documented(tool)
    codes = sorted(c for c in docs if c.isdigit() and 200 <= int(c) < 300)
    if codes:
        return codes[0]
    for key in ("2XX", "2xx", "default"):
        if key in docs:
            return key
    return None


def documents_not_found(tool: Tool) -> bool:
    """Whether the operation can say "no such object": it documents a 404 or 410, a ``4XX`` or
    ``default`` response, or nothing at all. One that documents only its success (and other
    refusals, such as 401) answers every well-formed id, as the spec describes it."""
    docs = {d.upper() for d in _documented(tool)}
    return not docs or bool(docs & {"404", "410", "4XX", "DEFAULT"})


def error_status(tool: Tool, kind: str) -> tuple[int, str | None]:
    """The status of a failure of ``kind``, and the documented response (key) it answers with."""
    natural = NATURAL[kind]
    docs = _documented(tool)
    if not docs:
        return natural, None
    upper = {d.upper(): d for d in docs}
    for pref in _PREFERENCES.get(kind, ("4XX",)):
        if pref.upper() in upper:
            return (natural if pref == "4XX" else int(pref)), upper[pref.upper()]
    if "default" in docs:
        return natural, "default"
    others = sorted(d for d in docs if d.isdigit() and 400 <= int(d) < 500)
    for d in [d for d in others if d not in _SPECIFIC] + [d for d in _SPECIFIC if d in others and d != "429"]:
        return int(d), d
    return natural, None


def _accepts(accept: str | None) -> list[tuple[str, float]]:
    if not accept:
        return [("*/*", 1.0)]
    out: list[tuple[str, float]] = []
    for part in accept.split(","):
        bits = [b.strip() for b in part.split(";")]
        q = 1.0
        for b in bits[1:]:
            if b.startswith("q="):
                try:
                    q = float(b[2:])
                except ValueError:
                    q = 0.0
        if bits[0]:
            out.append((bits[0].lower(), q))
    return sorted(out, key=lambda x: -x[1]) or [("*/*", 1.0)]


def _covers(pattern: str, media: str) -> bool:
    m = media.split(";")[0].strip().lower()
    if pattern in ("*/*", "*"):
        return True
    if pattern.endswith("/*"):
        return m.startswith(pattern[:-1])
    return pattern == m


def negotiate(content: dict[str, Any], accept: str | None) -> str | None:
    """The documented media type to answer in: the client's most wanted one that is documented
    (JSON first when it takes anything), None when the response has no content, NOT_ACCEPTABLE
    when nothing documented is acceptable."""
    if not content:
        return None
    declared = sorted(content, key=lambda m: (not is_json(m), list(content).index(m)))
    for pattern, q in _accepts(accept):
        if q <= 0:
            continue
        for media in declared:
            if _covers(pattern, media) or (pattern == "application/json" and is_json(media)):
                return media
    return NOT_ACCEPTABLE


# -- encodings -------------------------------------------------------------------------------


def _png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"\x00\xff\xff\xff"  # one white RGB pixel (filter byte 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


_GIF = (b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00"
        b"\x01\x00\x01\x00\x00\x02\x02D\x01\x00;")
_JPEG = bytes.fromhex(
    "ffd8ffe000104a46494600010100000100010000ffdb004300080606070605080707070909080a0c140d0c0b0b0c1912130f141d1a1f1e"
    "1d1a1c1c20242e2720222c231c1c2837292c30313434341f27393d38323c2e333432ffc0000b080001000101011100ffc4001f000001"
    "0501010101010100000000000000000102030405060708090a0bffc400b5100002010303020403050504040000017d01020300041105"
    "122131410613516107227114328191a1082342b1c11552d1f02433627282090a161718191a25262728292a3435363738393a43444546"
    "4748494a535455565758595a636465666768696a737475767778797a838485868788898a92939495969798999aa2a3a4a5a6a7a8a9aa"
    "b2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1f2f3f4f5f6f7f8f9faffda0008010100"
    "003f002bffd9")


def _pdf(text: str) -> bytes:
    body = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")[:200]
    stream = f"BT /F1 12 Tf 72 720 Td ({body}) Tj ET".encode("latin-1", "replace")
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
               b"/Resources << /Font << /F1 5 0 R >> >> >>",
               b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out = b"%PDF-1.4\n"
    offsets = []
    for i, obj in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + obj + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


def _xml_name(name: str) -> str:
    clean = "".join(c if c.isalnum() or c in "_-." else "_" for c in name) or "item"
    return clean if clean[0].isalpha() or clean[0] == "_" else f"_{clean}"


def _to_xml(value: Any, name: str, schema: dict[str, Any]) -> str:
    xml = as_dict(schema.get("xml"))
    tag = _xml_name(str(xml.get("name") or name))
    if isinstance(value, dict):
        props = as_dict(schema.get("properties"))
        inner = "".join(_to_xml(v, k, as_dict(props.get(k))) for k, v in value.items())
        return f"<{tag}>{inner}</{tag}>"
    if isinstance(value, list):
        items = as_dict(schema.get("items"))
        inner = "".join(_to_xml(v, str((items.get("xml") or {}).get("name") or "item"), items) for v in value)
        return f"<{tag}>{inner}</{tag}>"
    if value is None:
        return f"<{tag}/>"
    text = json.dumps(value) if isinstance(value, bool) else str(value)
    return f"<{tag}>{xml_escape(text)}</{tag}>"


def _csv(value: Any) -> str:
    rows = value if isinstance(value, list) else [value]
    out = io.StringIO()
    if rows and all(isinstance(r, dict) for r in rows):
        names = list(dict.fromkeys(k for r in rows for k in r))
        writer = csv.DictWriter(out, fieldnames=names, lineterminator="\n")
        writer.writeheader()
        for r in rows:
            writer.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in r.items()})
    else:
        writer2 = csv.writer(out, lineterminator="\n")
        for r in rows:
            writer2.writerow(r if isinstance(r, list) else [r])
    return out.getvalue()


#: A 1x1 lossless WebP.
_WEBP = base64.b64decode("UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==")


def _bmp() -> bytes:
    row = b"\xff\xff\xff\x00"  # one white BGR pixel, padded to 4 bytes
    info = struct.pack("<IiiHHIIiiII", 40, 1, 1, 1, 24, 0, len(row), 2835, 2835, 0, 0)
    return b"BM" + struct.pack("<IHHI", 14 + len(info) + len(row), 0, 0, 14 + len(info)) + info + row


def _tiff() -> bytes:
    """A baseline little-endian TIFF: one 8-bit grey pixel, uncompressed."""
    tags = [(256, 3, 1), (257, 3, 1), (258, 3, 8), (259, 3, 1), (262, 3, 1), (273, 4, 0), (277, 3, 1),
            (278, 3, 1), (279, 4, 1)]
    ifd_size = 2 + 12 * len(tags) + 4
    pixel_at = 8 + ifd_size
    entries = b"".join(struct.pack("<HHII", tag, kind, 1, pixel_at if tag == 273 else value)
                       for tag, kind, value in tags)
    return b"II*\x00" + struct.pack("<I", 8) + struct.pack("<H", len(tags)) + entries + b"\x00" * 4 + b"\xff"


def _ico() -> bytes:
    png = _png()
    return struct.pack("<HHH", 0, 1, 1) + struct.pack("<BBBBHHII", 1, 1, 0, 0, 1, 32, len(png), 22) + png


def encode(value: Any, media: str, schema: dict[str, Any], seed: str) -> bytes:
    """``value`` (generated from ``schema``) as bytes of ``media``."""
    main = media.split(";")[0].strip().lower()
    if is_json(main):
        return json.dumps(value, ensure_ascii=False).encode()
    if main in ("image/jpeg", "image/jpg", "image/pjpeg"):
        return _JPEG
    if main == "image/gif":
        return _GIF
    if main == "image/webp":
        return _WEBP
    if main in ("image/bmp", "image/x-bmp", "image/x-ms-bmp"):
        return _bmp()
    if main in ("image/tiff", "image/tif"):
        return _tiff()
    if main in ("image/x-icon", "image/vnd.microsoft.icon", "image/ico"):
        return _ico()
    if main.startswith("image/") and not main.endswith("+xml"):
        return _png()  # png, apng, image/*, and image types the mock cannot make: a real image still
    if main == "application/pdf":
        return _pdf(str(value)[:200] if value is not None else "atc mock")
    if main.endswith("/xml") or main.endswith("+xml"):
        if main == "image/svg+xml":
            return b'<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"><rect width="1" height="1"/></svg>'
        return ('<?xml version="1.0" encoding="UTF-8"?>' + _to_xml(value, "response", schema)).encode()
    if main == "text/csv":
        return _csv(value).encode()
    if main == "application/x-www-form-urlencoded":
        flat = value if isinstance(value, dict) else {"value": value}
        return urlencode({k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in flat.items()}).encode()
    if main == "text/html":
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1)
        return f"<!DOCTYPE html><html><body><pre>{xml_escape(text)}</pre></body></html>".encode()
    if main.startswith("text/"):
        return (value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)).encode()
    if isinstance(value, str) and schema.get("format") not in ("binary", "byte") and main != "application/octet-stream":
        return value.encode()
    r = rng("bytes", seed)
    return bytes(r.randrange(256) for _ in range(64))


def header_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(header_text(v) for v in value)
    if isinstance(value, dict):
        return ",".join(f"{k},{header_text(v)}" for k, v in value.items())
    return "" if value is None else str(value)


class ErrorMaker:
    """Error answers in the shape an operation documents (see the module's docstring)."""

    def __init__(self, faker: SchemaFaker) -> None:
        self.faker = faker

    def make(self, tool: Tool | None, kind: str, message: str, accept: str | None = None,
             **extra: Any) -> MockResponse:
        status, key = error_status(tool, kind) if tool is not None else (NATURAL[kind], None)
        own = {"error": kind, "message": message, **extra}
        if tool is None or key is None:
            return MockResponse(status, own)
        entry = tool.responses.get(key)
        if entry is None:  # documented by status code alone (formats without response objects)
            return MockResponse(status, own)
        content = as_dict(entry.get("content"))
        headers = {"X-Atc-Mock-Error": message.encode("ascii", "replace").decode()[:500]}
        headers.update(self.headers(tool, key, f"{tool.name}:{kind}"))
        media = negotiate(content, accept)
        if media is None:
            return MockResponse(status, None, headers, media_type=declared_media(entry, accept), data=b"")
        if media == NOT_ACCEPTABLE:
            media = next(iter(content))
        schema = content.get(media)
        if not isinstance(schema, dict) or not schema:
            value: Any = own if is_json(media) else message
        else:
            ctx = RequestContext(tool=tool.name, root_key=f"{tool.name}!{kind}")
            value = self.faker.response(schema, ctx)
            value = _with_message(value, schema, message, status, extra.get("parameter"), kind)
            problem = verdict(schema, value)
            if problem:
                headers[HEADER] = problem
        sent = concrete_media(media)
        if is_json(media):
            return MockResponse(status, value, headers, media_type=sent)
        data = encode(value, sent, schema or {}, f"{tool.name}!{kind}")
        return MockResponse(status, value, headers, media_type=sent, data=data)

    def headers(self, tool: Tool, key: str, seed: str) -> dict[str, str]:
        """The documented headers of response ``key``, generated from their schemas."""
        entry = tool.responses.get(key) or {}
        out: dict[str, str] = {}
        for name, spec in (entry.get("headers") or {}).items():
            if not isinstance(spec, dict) or name.lower() in ("content-type", "content-length", "transfer-encoding",
                                                              "connection"):
                continue
            schema = as_dict(spec.get("schema"))
            value = self.faker.response(schema or {"type": "string"}, RequestContext(tool=tool.name,
                                                                                       root_key=f"{seed}#{name}"))
            out[name] = header_text(value)
        return out


def _fits(schema: dict[str, Any], key: str, value: Any) -> bool:
    props = as_dict(schema.get("properties"))
    sub = props.get(key)
    return isinstance(sub, dict) and is_valid(sub, value)


def _with_message(value: Any, schema: dict[str, Any], message: str, status: int, parameter: Any,
                  kind: str) -> Any:
    """The generated error object with atc's message (and the status, and the parameter at fault)
    in the fields that take them; a string schema is the message itself."""
    if isinstance(value, str) and schema_type(schema) in ("string", None) and is_valid(schema, message):
        return message
    if not isinstance(value, dict):
        return value
    out = dict(value)
    props = as_dict(schema.get("properties"))
    placed = False
    for key in _MESSAGE_FIELDS:
        if key not in props:
            continue
        sub = props[key]
        if isinstance(sub, dict) and schema_type(sub) == "object" and isinstance(out.get(key), dict):
            out[key] = _with_message(out[key], sub, message, status, parameter, kind)
            placed = True
            break
        for text in (message, message[:int(sub.get("maxLength") or 0)] if isinstance(sub, dict)
                     and isinstance(sub.get("maxLength"), int) else None):
            if text and _fits(schema, key, text):
                out[key] = text
                placed = True
                break
        if placed:
            break
    chosen = next((k for k in _MESSAGE_FIELDS if k in props and out.get(k) == message), None)
    for key in _KIND_FIELDS:
        if key in props and key != chosen and _fits(schema, key, kind):
            out[key] = kind
    for key in _CODE_FIELDS:
        if key in props and key != chosen and out.get(key) != kind:
            for candidate in (status, str(status)):
                if _fits(schema, key, candidate):
                    out[key] = candidate
                    break
    if parameter:
        for key in _PARAM_FIELDS:
            if key in props and _fits(schema, key, parameter):
                out[key] = parameter
    return out
