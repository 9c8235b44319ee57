"""Response bodies: content encodings decoded under a size cap, then bytes -> program data.

Servers compress (``Content-Encoding: gzip``, ``deflate``, ``br``, ``zstd``; the gateway offers
all four in ``Accept-Encoding``). A compressed body is decoded here, not by httpx, because httpx
decodes a whole network chunk at once: 64 KB of a gzip or brotli bomb becomes gigabytes in the
host's memory before any cap can look at it. Each decoder here is pulled for at most
``CHUNK`` bytes at a time (zlib ``max_length``, brotli ``output_buffer_limit``, a zstandard
``stream_reader``), and ``read_body`` stops at the cap on the raw AND on the decoded size.

``to_data`` then turns the bytes into what the program gets:

- JSON (declared, or a body that parses as JSON) -> the parsed value, made safe for the host's own
  JSON output (``NaN``/``Infinity`` -> None, lone surrogates -> U+FFFD, depth bounded);
- text (``text/*``, XML, YAML, CSV, JavaScript, form data, or no type at all) -> ``str``, decoded
  with the declared charset (UTF-8 by default);
- anything else, or text that is not valid in its charset -> a binary object
  ``{"content_type": str, "size": int, "base64": str}``: bytes are not JSON, and replacing
  invalid bytes by U+FFFD would corrupt an image or an archive beyond repair.
"""

from __future__ import annotations

import base64
import codecs
import json
import re
import zlib
from collections.abc import Callable, Iterator
from typing import Any

from protocols.errors import ToolError
from sandbox.jsonbounds import count_values, max_depth

__all__ = ["read_body", "to_data", "accept_encoding", "binary_object", "is_binary_object", "MAX_RESPONSE_DEPTH",
           "CHUNK", "BodyTooLarge"]

#: Deepest nesting of a JSON response the gateway hands on (deeper data overflows recursive code).
MAX_RESPONSE_DEPTH = 200
#: Most bytes one decoding step may produce.
CHUNK = 64 * 1024

_TEXT_TYPES = ("text/", "application/xml", "application/xhtml", "application/javascript", "application/ecmascript",
               "application/x-www-form-urlencoded", "application/yaml", "application/x-yaml", "application/csv",
               "application/graphql", "application/sql", "application/x-ndjson", "application/jsonl")
_MEDIA_TYPES = ("image/", "audio/", "video/", "font/", "model/")
_BINARY_KEYS = frozenset({"base64", "content_type", "size", "filename"})


class BodyTooLarge(Exception):
    """The body (raw or decoded) passed the cap; ``decoded`` says which."""

    def __init__(self, cap: int, decoded: bool) -> None:
        super().__init__(f"larger than the {cap}-byte cap" + (" once decompressed" if decoded else ""))
        self.cap = cap
        self.decoded = decoded


def accept_encoding() -> str:
    """What the gateway can decode, for the ``Accept-Encoding`` header."""
    offered = ["gzip", "deflate"]
    for name, module in (("br", "brotli"), ("zstd", "zstandard")):
        try:
            __import__(module)
        except ImportError:
            continue
        offered.append(name)
    return ", ".join(offered)


class _Pull:
    """A raw byte iterator as a file-like ``read(n)`` (what zstandard's stream reader pulls from)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._buffer = b""

    def read(self, n: int = -1) -> bytes:
        while n < 0 or len(self._buffer) < n:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self._buffer += chunk
        if n < 0:
            out, self._buffer = self._buffer, b""
        else:
            out, self._buffer = self._buffer[:n], self._buffer[n:]
        return out


def _zlib(chunks: Iterator[bytes], gzip: bool) -> Iterator[bytes]:
    # gzip: header auto-detected (wbits 47); deflate: zlib-wrapped, or raw (some servers send raw
    # deflate, as browsers tolerate): decided on the first bytes.
    decoder: Any = None
    for chunk in chunks:
        if decoder is None:
            if gzip:
                decoder = zlib.decompressobj(47)
            else:
                raw = not (len(chunk) >= 2 and (chunk[0] & 0x0F) == 8 and (chunk[0] << 8 | chunk[1]) % 31 == 0)
                decoder = zlib.decompressobj(-15 if raw else 15)
        data = chunk
        while data:
            yield decoder.decompress(data, CHUNK)
            data = decoder.unconsumed_tail
            if decoder.eof and decoder.unused_data and gzip:
                # another gzip member follows (concatenated gzip is valid)
                data = decoder.unused_data
                decoder = zlib.decompressobj(47)
    if decoder is not None:
        yield decoder.flush()
        if gzip and not decoder.eof:
            raise _CorruptStream("the gzip stream ends early")


def _brotli(chunks: Iterator[bytes]) -> Iterator[bytes]:
    import brotli  # lazy: a C extension loaded only for a br-encoded response

    decoder = brotli.Decompressor()
    for chunk in chunks:
        yield decoder.process(chunk, output_buffer_limit=CHUNK)
        while not decoder.can_accept_more_data():
            yield decoder.process(b"", output_buffer_limit=CHUNK)
    # the decoder may hold output it did not hand out yet: drain it, a step at a time
    while not decoder.is_finished():
        out = decoder.process(b"", output_buffer_limit=CHUNK)
        if not out:
            raise _CorruptStream("the brotli stream ends early")
        yield out


def _zstd(chunks: Iterator[bytes]) -> Iterator[bytes]:
    import zstandard  # lazy: a C extension loaded only for a zstd-encoded response

    source: Any = _Pull(chunks)  # a file-like: stream_reader only calls read()
    reader = zstandard.ZstdDecompressor().stream_reader(source, read_size=CHUNK, read_across_frames=True)
    while True:
        out = reader.read(CHUNK)
        if not out:
            return
        yield out


_DECODERS: dict[str, Callable[[Iterator[bytes]], Iterator[bytes]]] = {
    "gzip": lambda c: _zlib(c, True), "x-gzip": lambda c: _zlib(c, True),
    "deflate": lambda c: _zlib(c, False), "br": _brotli, "zstd": _zstd,
}
_PACKAGES = {"br": "brotli", "zstd": "zstandard"}


def _capped(chunks: Iterator[bytes], cap: int, decoded: bool) -> Iterator[bytes]:
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > cap:
            raise BodyTooLarge(cap, decoded)
        yield chunk


def read_body(raw: Iterator[bytes], content_encoding: str, cap: int, tool: str) -> bytes:
    """The decoded body of a response whose raw bytes ``raw`` yields. Raises ``BodyTooLarge`` past
    ``cap`` (raw or decoded) and ``ToolError`` for an encoding it cannot decode."""
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    stream: Iterator[bytes] = _capped(raw, cap, False)
    for coding in reversed(codings):  # the last one applied is undone first
        decoder = _DECODERS.get(coding)
        if decoder is None:
            raise ToolError(f"{tool}: the API answered with content encoding {coding!r}, which the gateway cannot "
                            "decode (it offers gzip, deflate, br, zstd)", tool=tool)
        package = _PACKAGES.get(coding)
        if package is not None:
            try:
                __import__(package)
            except ImportError:
                raise ToolError(f"{tool}: the API answered with {coding!r} compression, which needs the {package} "
                                f"package on the host", tool=tool, hint=f"pip install {package}") from None
        stream = decoder(stream)
    out = bytearray()
    try:
        for chunk in _capped(stream, cap, bool(codings)):
            out += chunk
    except _decoder_errors() as exc:
        raise ToolError(f"{tool}: the response body is not valid {'+'.join(codings)} data ({exc})",
                        tool=tool) from None
    return bytes(out)


class _CorruptStream(ValueError):
    """A compressed stream that ends early."""


def _decoder_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a decoder raises for corrupt data (the optional packages' own included)."""
    errors: list[type[BaseException]] = [zlib.error, _CorruptStream]
    try:
        import brotli  # lazy: as in _brotli

        errors.append(brotli.error)
    except ImportError:
        pass
    try:
        import zstandard  # lazy: as in _zstd

        errors.append(zstandard.ZstdError)
    except ImportError:
        pass
    return tuple(errors)


def _media(content_type: str) -> tuple[str, str | None]:
    """(media type, charset) of a Content-Type header."""
    parts = [p.strip() for p in content_type.split(";")]
    media = parts[0].lower() if parts else ""
    charset = None
    for p in parts[1:]:
        key, _, value = p.partition("=")
        if key.strip().lower() == "charset":
            charset = value.strip().strip('"') or None
    return media, charset


def _foreign(charset: str | None) -> bool:
    """A declared charset that is not a Unicode one json detects by itself (latin-1, cp1252...)."""
    if not charset:
        return False
    try:
        name = codecs.lookup(charset).name
    except LookupError:
        return False
    return not name.startswith("utf")


def binary_object(raw: bytes, content_type: str) -> dict[str, Any]:
    """The program's view of a binary body."""
    return {"content_type": content_type or "application/octet-stream", "size": len(raw),
            "base64": base64.b64encode(raw).decode("ascii")}


def is_binary_object(value: Any) -> bool:
    """Is ``value`` a binary object (as responses give, and as uploads accept)?"""
    return (isinstance(value, dict) and isinstance(value.get("base64"), str)
            and set(value) <= _BINARY_KEYS)


def to_data(raw: bytes, content_type: str, max_values: int | None = None) -> Any:
    """JSON data, text or a binary object (see the module docstring); ``None`` for no body.
    JSON with more than ``max_values`` values is refused (``ValueError``) before it is decoded:
    its Python objects would cost the host many times its bytes (``sandbox.jsonbounds``)."""
    if not raw:
        return None
    media, charset = _media(content_type)
    is_json = "json" in media
    # JSON is also recognised under a wrong or missing type, unless the type says media.
    if is_json or (raw.lstrip()[:1] in (b"{", b"[") and not media.startswith(_MEDIA_TYPES)):
        if max_values is not None and count_values(raw, max_values) > max_values:
            raise ValueError(f"the response holds more than {max_values} JSON values, more than a run with "
                             "its --memory may take")
        try:
            data = json.loads(raw if not _foreign(charset) else raw.decode(charset or "utf-8"),
                              parse_constant=lambda _name: None)
        except RecursionError:
            raise ValueError(f"the response is nested more than {MAX_RESPONSE_DEPTH} levels deep") from None
        except (ValueError, LookupError):
            pass
        else:
            if raw.count(b"[") + raw.count(b"{") >= MAX_RESPONSE_DEPTH and max_depth(raw) > MAX_RESPONSE_DEPTH:
                raise ValueError(f"the response is nested more than {MAX_RESPONSE_DEPTH} levels deep")
            return _clean(data, has_escapes=True) if _has_lone_surrogate(raw) else data
    textual = is_json or not media or media.startswith(_TEXT_TYPES) or media.endswith(("+xml", "+json", "+yaml"))
    if textual:
        try:
            encoding = codecs.lookup(charset).name if charset else "utf-8"
        except LookupError:
            encoding = "utf-8"
        try:
            text = raw.decode("utf-8-sig" if encoding == "utf-8" else encoding)
        except UnicodeDecodeError:
            return binary_object(raw, content_type)
        if not text.strip():
            return None
        if "\x00" not in text or media.startswith("text/"):
            return text
    return binary_object(raw, content_type)


#: Any \u escape of a surrogate (a quick test before the exact one).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
#: A \u escape of a surrogate that is not half of a pair (json decodes it to a lone surrogate).
_LONE_SURROGATE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])|"
                             rb"(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F]")


def _has_lone_surrogate(raw: bytes) -> bool:
    return b"\\u" in raw and _SURROGATE_ESCAPE.search(raw) is not None and _LONE_SURROGATE.search(raw) is not None


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
