"""Taking the host's secrets out of what an API answers, before the program (or the model) sees it.

The gateway adds credentials on the host, so it knows every secret value a run may use. Some APIs
send them back: an echo of the request headers, a bad key quoted in an error message, a URL with
the query key in it. ``Redactor`` replaces each known secret, and the forms it takes on the wire
(percent-encoded in a URL, the base64 of a Basic ``user:password`` pair, the password alone), by
``[REDACTED]`` wherever it appears: in JSON strings and keys, text bodies, header values and error
messages. It counts what it replaced so that the call log can say so (``ToolCall.redacted``).

Secrets shorter than ``MIN_LENGTH`` characters are only replaced where a whole string equals them:
replacing every ``"ab"`` inside a response would destroy it and protect nothing.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus

__all__ = ["Redactor", "MASK", "MIN_LENGTH"]

MASK = "[REDACTED]"
MIN_LENGTH = 4


_SCHEME_VALUE = re.compile(r"^([A-Za-z][A-Za-z0-9_-]{0,20})\s+(\S.*)$")


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
    if ":" in secret:  # a Basic "user:password" pair: its header form, and the password alone
        out.add(base64.b64encode(secret.encode()).decode())
        out.add(secret.split(":", 1)[1])
    else:
        out.add(base64.b64encode(secret.encode()).decode())
    return {v for v in out if v}


class Redactor:
    """Replaces known secrets in response data and text. Falsy when there is nothing to hide."""

    def __init__(self, secrets: Iterable[str]) -> None:
        variants: set[str] = set()
        exact: set[str] = set()
        for secret in secrets:
            if not secret:
                continue
            for v in _variants(secret):
                (variants if len(v) >= MIN_LENGTH else exact).add(v)
        # Longest first: a secret that contains another one is replaced whole.
        self._variants = sorted(variants, key=len, reverse=True)
        self._raw = [v.encode() for v in self._variants]
        self._exact = exact

    def __bool__(self) -> bool:
        return bool(self._variants or self._exact)

    def text(self, text: str) -> tuple[str, int]:
        """``text`` without secrets, and how many were replaced."""
        if text in self._exact:
            return MASK, 1
        count = 0
        for v in self._variants:
            if v in text:
                count += text.count(v)
                text = text.replace(v, MASK)
        return text, count

    def may_hold(self, raw: bytes) -> bool:
        """A quick test on the raw body: False means no secret can be in the decoded data. JSON can
        spell characters as escapes (``\\u0061``, ``\\/``), so a body with escapes is always walked."""
        if self._exact or b"\\" in raw:
            return True
        return any(v in raw for v in self._raw)

    def data(self, value: Any) -> tuple[Any, int]:
        """JSON-like ``value`` with every secret replaced in strings and keys, and the count. Changes
        ``value`` in place (the gateway's own freshly decoded copy). Iterative: responses may be
        deeply nested."""
        if isinstance(value, str):
            return self.text(value)
        if not isinstance(value, dict | list):
            return value, 0
        count = 0
        root: list[Any] = [value]
        stack: list[tuple[Any, Any]] = [(root, 0)]
        while stack:
            parent, key = stack.pop()
            item = parent[key]
            if isinstance(item, str):
                fixed, n = self.text(item)
                if n:
                    parent[key], count = fixed, count + n
            elif isinstance(item, dict):
                if any(isinstance(k, str) and self.text(k)[1] for k in item):
                    renamed: dict[str, Any] = {}
                    for k, v in item.items():
                        new_key, n = self.text(k)
                        count += n
                        renamed[new_key] = v
                    item = parent[key] = renamed
                stack.extend((item, k) for k in item)
            elif isinstance(item, list):
                stack.extend((item, i) for i in range(len(item)))
        return root[0], count
