"""Taking the host's secrets out of what an API answers, before the program (or the model) sees it.

The gateway adds credentials on the host, so it knows every secret value a run may use. Some APIs
send them back: an echo of the request headers, a bad key quoted in an error message, a URL with
the query key in it, a pagination cursor that packs the request (key included) into base64. A
program that reads such an echo can send the key on as an ordinary argument to any tool, so
``Redactor`` replaces each known secret by ``[REDACTED]`` in every form that costs little to find:

- the secret itself, and its wire forms: percent-encoded (``quote``/``quote_plus``), the base64 of
  a Basic ``user:password`` pair, the password alone, a header value without its scheme word;
- in any letter case (an API that upper- or lower-cases what it echoes), for forms of 8
  characters or more, and as hex (``6b6579...``);
- inside base64 and base64url text at any offset: for each of the three alignments a secret can
  have in the encoded bytes, the part of its encoding that does not depend on its neighbours is
  precomputed (a "core"), so a plain substring search finds it in a cursor, a token or a data
  URL; the whole base64 run around a hit is replaced (it cannot be cut at a byte boundary);
- behind one layer of percent-encoding (of some characters or all), HTML character references
  or JSON ``\\u`` escapes (a JSON document quoted inside a string): the string is decoded, and
  when the decoded text holds a secret it is given back decoded, with the secret replaced;
- as a JSON number (a numeric key echoed as ``{"id": 12345678}``): the number becomes the string
  ``"[REDACTED]"``;
- in JSON strings and object keys, text bodies, header values and header NAMES, redirect
  locations and error messages (the gateway calls ``text`` on each of those).

Every replacement is counted (``ToolCall.redacted``). What is NOT covered, because an API that
cooperates with an attacker can always do it: a secret split across fields or calls, encrypted,
compressed, reversed or otherwise transformed, base64 wrapped over several lines, or encoded twice
in layers other than the ones above. Do not give credentials to an API that may do that.

Secrets shorter than ``MIN_LENGTH`` characters are only replaced where a whole string (or a whole
number) equals them: replacing every ``"ab"`` inside a response would destroy it and protect
nothing. The cost is bounded: ``plan`` decides on the raw body, with a few substring searches
over it and at most three decoded views of it (each linear in the body, which is capped by
``max_response_bytes``), whether the decoded data needs to be walked at all.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote, quote_plus, unquote

__all__ = ["Redactor", "MASK", "MIN_LENGTH"]

MASK = "[REDACTED]"
MIN_LENGTH = 4
#: Forms at least this long are matched in any letter case (shorter ones would hit ordinary words).
FOLD_LENGTH = 8
#: Shortest base64 core searched for (6 characters: one false hit in about 10^10 random positions).
MIN_CORE = 6

_SCHEME_VALUE = re.compile(r"^([A-Za-z][A-Za-z0-9_-]{0,20})\s+(\S.*)$")
_B64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_")
_TO_URL = str.maketrans("+/", "-_")
_JSON_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|[\"\\/bfnrt])")
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _variants(secret: str) -> set[str]:
    """The forms a secret takes on the wire and in echoes of it. A header value given whole
    (``token abc...``, ``Bearer abc...``, ``Basic dXNlcjpwdw==``) is also hidden without its scheme
    word, since an API quoting a bad token quotes the token alone (a Basic value also as the
    ``user:password`` it encodes)."""
    scheme = _SCHEME_VALUE.match(secret)
    if scheme is not None:
        out = _variants(scheme.group(2))
        if scheme.group(1).lower() == "basic":
            try:
                pair = base64.b64decode(scheme.group(2), validate=True).decode("utf-8")
            except (ValueError, UnicodeDecodeError):
                pair = ""
            if ":" in pair:
                out |= _variants(pair)
        return out | {secret, quote(secret, safe=""), quote_plus(secret), quote(secret)}
    out = {secret, quote(secret, safe=""), quote_plus(secret), quote(secret)}
    if ":" in secret:  # a Basic "user:password" pair (its base64 is found by ``_cores``), and the password
        out.add(secret.split(":", 1)[1])
    return {v for v in out if v}


def _cores(secret: str) -> set[str]:
    """The parts of the base64 (and base64url) encoding of ``secret`` that are the same wherever
    it sits in the encoded bytes: one per alignment (offset mod 3), without the first group of
    four characters (shared with the bytes before it) and the last incomplete one. The cores of a
    core find the secret base64-encoded twice (a cursor packed inside another cursor)."""
    data = secret.encode()
    whole = base64.b64encode(data).decode()  # the secret encoded alone (a Basic header), padding and all
    out: set[str] = {whole, whole.translate(_TO_URL)} if len(whole) >= MIN_LENGTH else set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data).decode()
        start = 4 if offset else 0
        stop = len(encoded) - (4 if (offset + len(data)) % 3 else 0)
        core = encoded[start:stop]
        if len(core) >= MIN_CORE:
            out |= {core, core.translate(_TO_URL)}
    return out


def _json_unescape(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        esc = m.group(1)
        return chr(int(esc[1:], 16)) if esc[0] == "u" else _SIMPLE_ESCAPES[esc]

    return _JSON_ESCAPE.sub(one, text)


_ALL_DECODERS = frozenset({"%", "&", "\\"})


def _escape_patterns(chars: set[str]) -> dict[str, str]:
    """For each decoder, a regex of the escapes that could spell one of ``chars`` (the characters
    of the secrets, and the escape characters themselves, for escapes inside escapes). A body
    without any of them cannot hold a secret that the decoder would reveal: ``%20`` and ``\\u00e9``
    are everywhere in real responses, but rarely an escaped letter of a key."""
    import html.entities  # lazy: a table of 2,231 entities, read only for an escaped letter

    chars = chars | {c.swapcase() for c in chars}  # forms of 8 characters or more match in any case
    # an escape inside an escape: a percent sign percent-encoded (%2561) or JSON-escaped (\u0025)
    pct = sorted({f"{b:02x}" for c in chars | {"%"} for b in c.encode("utf-8")})
    units = sorted({f"{u:04x}" for c in chars | {"%"} for u in (
        [ord(c)] if ord(c) < 0x10000 else [0xD800 + ((ord(c) - 0x10000) >> 10), 0xDC00 + ((ord(c) - 0x10000) & 0x3FF)])})
    refs = sorted({f"[xX]0*{ord(c):x};?" for c in chars} | {f"0*{ord(c)};?" for c in chars})
    named = sorted({re.escape(name) for name, value in html.entities.html5.items() if value in chars})
    return {
        # each starts with its escape character, literally: the regex engine then skips to it
        "%": "%(?i:" + "|".join(pct) + ")",
        "\\": r"\\(?:/|(?i:u(?:" + "|".join(units) + ")))",
        "&": "&(?:#(?:" + "|".join(refs) + ")" + ("|" + "|".join(named) if named else "") + ")",
    }


class Redactor:
    """Replaces known secrets in response data and text. Falsy when there is nothing to hide."""

    def __init__(self, secrets: Iterable[str]) -> None:
        variants: set[str] = set()
        exact: set[str] = set()
        cores: set[str] = set()
        numbers: set[int] = set()
        for secret in secrets:
            if not secret:
                continue
            for v in _variants(secret):
                (variants if len(v) >= MIN_LENGTH else exact).add(v)
                cores |= _cores(v)
                if len(v) >= MIN_LENGTH:
                    variants.add(v.encode().hex())
            for core in _cores(secret):
                cores |= _cores(core)
            if secret.isascii() and secret.isdigit() and len(str(int(secret))) >= MIN_LENGTH:
                numbers.add(int(secret))  # also with its leading zeros gone, as a JSON number has them
        # Longest first: a secret that contains another one is replaced whole.
        self._short = sorted((v for v in variants if len(v) < FOLD_LENGTH), key=len, reverse=True)
        folded = sorted((v for v in variants if len(v) >= FOLD_LENGTH), key=len, reverse=True)
        self._folded = [v.lower() for v in folded]
        self._folded_rx = re.compile("|".join(re.escape(v) for v in folded), re.IGNORECASE) if folded else None
        self._cores = sorted(cores, key=len, reverse=True)
        self._exact = exact
        self._numbers = numbers
        self._number_forms = sorted({str(n) for n in numbers})
        self._raw_plain = [v.encode() for v in self._short + self._cores] + [n.encode() for n in self._number_forms]
        self._raw_folded = [v.encode() for v in self._folded]
        forms = [re.escape(v) for v in self._cores + self._short] + [f"(?i:{re.escape(v)})" for v in folded]
        self._any_rx = re.compile("|".join(forms)) if forms else None
        every = [*self._short, *self._folded, *self._cores]
        self._shortest = min((len(f) for f in every), default=0)
        self._numeric = bool(numbers) or any(re.fullmatch(r"[0-9.eE+-]+", f) for f in [*every, *exact])
        escapes = _escape_patterns({c for v in variants | exact for c in v})
        self._escape_text = {k: re.compile(v) for k, v in escapes.items()}
        self._escape_raw = {k: re.compile(v.encode()) for k, v in escapes.items()}

    def __bool__(self) -> bool:
        return bool(self._short or self._folded or self._exact)

    # -- finding ------------------------------------------------------------------------------

    def _hits(self, text: str) -> int:
        """How many secrets ``text`` holds as it stands (no decoding; overlaps counted twice)."""
        n = sum(text.count(v) for v in self._short) + sum(text.count(c) for c in self._cores)
        if self._folded:
            low = text.lower()
            n += sum(low.count(v) for v in self._folded)
        return n

    def _holds(self, text: str) -> bool:
        """Does ``text`` hold a secret as it stands? One regex search for a short string; a
        substring search per form (each at C speed) for a long one."""
        if len(text) < 4096:
            return self._any_rx is not None and self._any_rx.search(text) is not None
        if any(v in text for v in self._short) or any(c in text for c in self._cores):
            return True
        if self._folded:
            low = text.lower()
            return any(v in low for v in self._folded)
        return False

    def plan(self, raw: bytes) -> frozenset[str] | None:
        """What the walk of the data decoded from ``raw`` must do: None when no secret can be in
        it, else the decoders a string needs before it is searched (``%``, ``&``, ``\\``; empty:
        none, the secrets are there as they stand). Decided on the whole raw body: a decoder is
        needed only when the body decoded by it holds more secrets than before."""
        if self._exact:
            return _ALL_DECODERS
        low = raw.lower()
        hit = any(v in raw for v in self._raw_plain) or any(v in low for v in self._raw_folded)
        found = {k for k, rx in self._escape_raw.items() if k.encode() in raw and rx.search(raw)}
        if not found:
            return frozenset() if hit else None
        text = raw.decode("utf-8", "replace")
        needs: set[str] = set()
        base, before = text, self._hits(text)
        if "\\" in found:
            once = _json_unescape(text)
            twice = _json_unescape(once) if self._escape_text["\\"].search(once) else once
            after_once, after_twice = self._hits(once), self._hits(twice)
            if after_once > before or after_twice > after_once:
                needs.add("\\")
            base, before = twice, after_twice
            found |= {k for k in ("%", "&") if self._escape_text[k].search(base)}  # escaped escapes
        if "%" in found and self._hits(unquote(base)) > before:
            needs.add("%")
        if "&" in found and self._hits(html.unescape(base)) > before:
            needs.add("&")
        return frozenset(needs) if hit or needs or before else None

    def may_hold(self, raw: bytes) -> bool:
        """A quick test on the raw body: False means no secret can be in the decoded data."""
        return self.plan(raw) is not None

    def _decodings(self, text: str, allowed: frozenset[str]) -> list[Callable[[str], str]]:
        """The decoders (of those ``allowed``) that could reveal a secret in ``text``: only where
        it holds an escape of one of the secrets' characters."""
        out: list[Callable[[str], str]] = []
        for key, decode in (("%", unquote), ("&", html.unescape), ("\\", _json_unescape)):
            if key in allowed and key in text and self._escape_text[key].search(text):
                out.append(decode)
        return out

    # -- replacing ----------------------------------------------------------------------------

    def _cut_cores(self, text: str) -> tuple[str, int]:
        """Every base64 run that holds a core of a secret, replaced whole."""
        count = 0
        for core in self._cores:
            start = text.find(core)
            while start >= 0:
                left, right = start, start + len(core)
                while left > 0 and text[left - 1] in _B64_CHARS:
                    left -= 1
                while right < len(text) and text[right] in _B64_CHARS:
                    right += 1
                while right < len(text) and text[right] == "=":
                    right += 1
                text = text[:left] + MASK + text[right:]
                count += 1
                start = text.find(core, left + len(MASK))
        return text, count

    def text(self, text: str, decoders: frozenset[str] = _ALL_DECODERS, _depth: int = 0) -> tuple[str, int]:
        """``text`` without secrets, and how many were replaced; ``decoders`` are those tried
        (``plan``; default: all)."""
        if text in self._exact:
            return MASK, 1
        if not self._holds(text) and not self._decodings(text, decoders):
            return text, 0
        count = 0
        if self._cores:  # first: a hit inside a base64 run takes the whole run
            text, count = self._cut_cores(text)
        for v in self._short:
            if v in text:
                count += text.count(v)
                text = text.replace(v, MASK)
        if self._folded_rx is not None:
            low = text.lower()
            if any(v in low for v in self._folded):
                text, n = self._folded_rx.subn(MASK, text)
                count += n
        if _depth < 2:
            for decode in self._decodings(text, decoders):
                decoded = decode(text)
                if decoded != text and (self._holds(decoded) or decoded in self._exact or
                                        self._decodings(decoded, decoders)):
                    fixed, n = self.text(decoded, decoders, _depth + 1)
                    if n:
                        text, count = fixed, count + n
        return text, count

    def scrub(self, value: Any, raw: bytes) -> tuple[Any, int]:
        """``data(value)`` for a body decoded from ``raw``, walked only when ``plan`` says a secret
        may be there, and with only the decoders it needs."""
        plan = self.plan(raw)
        if plan is None:
            return value, 0
        return self.data(value, plan)

    def _number(self, value: int | float) -> bool:
        """Is this JSON number a secret (or does its decimal form hold one)?"""
        if isinstance(value, int) and value in self._numbers or \
                isinstance(value, float) and value.is_integer() and int(value) in self._numbers:
            return True
        try:
            digits = str(value)
        except ValueError:  # an int past the conversion limit: no secret is that long
            return False
        return digits in self._exact or self._holds(digits) or any(f in digits for f in self._number_forms)

    def data(self, value: Any, decoders: frozenset[str] = _ALL_DECODERS) -> tuple[Any, int]:
        """JSON-like ``value`` with every secret replaced in strings, keys and numbers, and the count.
        Changes ``value`` in place (the gateway's own freshly decoded copy). Iterative: responses may
        be deeply nested. Strings too short to hold any form of a secret, and numbers when no
        secret is made of digits, are passed over without a search."""
        if isinstance(value, str):
            return self.text(value, decoders)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return (MASK, 1) if self._numeric and self._number(value) else (value, 0)
        if not isinstance(value, dict | list):
            return value, 0
        count = 0
        clean_keys: set[str] = set()  # object keys repeat: each distinct one is searched once
        stack: list[Any] = [value]
        shortest, exact, numeric = self._shortest, self._exact, self._numeric
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                if any(k not in clean_keys and self._dirty_key(k, decoders, clean_keys) for k in node):
                    renamed: dict[str, Any] = {}
                    for k, v in node.items():
                        new_key, n = self.text(k, decoders)
                        count += n
                        renamed[new_key] = v
                    node.clear()
                    node.update(renamed)
                pairs: Any = node.items()
            else:
                pairs = enumerate(node)
            changed: list[tuple[Any, Any]] = []
            for key, item in pairs:
                kind = type(item)
                if kind is str:
                    if len(item) >= shortest or item in exact:
                        fixed, n = self.text(item, decoders)
                        if n:
                            changed.append((key, fixed))
                            count += n
                elif kind is dict or kind is list:
                    stack.append(item)
                elif kind is int or kind is float:
                    if numeric and self._number(item):
                        changed.append((key, MASK))
                        count += 1
                elif isinstance(item, dict | list):
                    stack.append(item)
                elif isinstance(item, str):
                    fixed, n = self.text(item, decoders)
                    if n:
                        changed.append((key, fixed))
                        count += n
            for key, fixed in changed:
                node[key] = fixed
        return value, count

    def _dirty_key(self, key: Any, decoders: frozenset[str], clean: set[str]) -> bool:
        if not isinstance(key, str):
            return False
        if self.text(key, decoders)[1]:
            return True
        if len(clean) < 100_000:
            clean.add(key)
        return False

    def headers(self, headers: dict[str, str]) -> tuple[dict[str, str], int]:
        """Response headers with secrets taken out of names and values (a header NAMED after the
        key is an echo too); names that become equal are joined like repeated headers."""
        out: dict[str, str] = {}
        count = 0
        for name, value in headers.items():
            new_name, n = self.text(name)
            new_value, m = self.text(value)
            count += n + m
            out[new_name] = f"{out[new_name]}, {new_value}" if new_name in out else new_value
        return out, count
