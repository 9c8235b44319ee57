"""Regular expressions of a spec, for ``atc mock``: strings that match them, and checks against them.

Specs write ``pattern`` in ECMA-262 syntax (JSON Schema's dialect). Python's ``re`` reads most of it,
but not Unicode property escapes (``\\p{L}``, ``\\P{Lu}``) nor ``(?<name>...)`` groups, so
:func:`translate` rewrites those first. :func:`pattern_value` builds a matching string from Python's
own parse of the pattern: literals, classes, quantifiers (steered towards a length window, so that
``minLength``/``maxLength`` are met by the pattern rather than by padding), groups and alternatives.
Look-arounds are skipped while building and checked afterwards, with a few tries. :func:`is_safe`
tells whether matching a pattern against a string an untrusted client chose is bounded: nested
unbounded quantifiers and back-references can backtrack exponentially, and ``re`` has no timeout.
"""

from __future__ import annotations

import functools
import random
import re
import string
from typing import Any

__all__ = ["translate", "compiled", "is_safe", "pattern_value"]

#: ECMA-262 Unicode properties -> a Python class body that matches (an ASCII-leaning rendering of)
#: the same characters. Python's ``\w`` and ``\d`` are Unicode-aware on ``str`` already.
_PROPERTIES = {
    "L": r"^\W\d_", "Letter": r"^\W\d_", "Alphabetic": r"^\W\d_",
    "Lu": "A-ZÀ-ÖØ-Þ", "Uppercase_Letter": "A-ZÀ-ÖØ-Þ",
    "Ll": "a-zß-öø-ÿ", "Lowercase_Letter": "a-zß-öø-ÿ",
    "N": r"\d", "Nd": r"\d", "Number": r"\d", "Decimal_Number": r"\d",
    "P": r"!-/:-@\[-`{-~", "Punctuation": r"!-/:-@\[-`{-~",
    "S": r"$+<=>^`|~", "Symbol": r"$+<=>^`|~",
    "Z": r"\s", "Zs": " ", "White_Space": r"\s", "Separator": r"\s",
}
_PROPERTY = re.compile(r"\\([pP])\{(?:[A-Za-z_]+=)?([A-Za-z_]+)\}")
_NAMED_GROUP = re.compile(r"\(\?<(?=[A-Za-z_])")

# Characters a generated string may contain where the pattern allows "anything" or a negated class.
_PRINTABLE = string.ascii_letters + string.digits + " -_.@:/"
_CATEGORIES: dict[str, str] = {
    "CATEGORY_DIGIT": string.digits,
    "CATEGORY_NOT_DIGIT": string.ascii_letters + "-_",
    "CATEGORY_WORD": string.ascii_letters + string.digits + "_",
    "CATEGORY_NOT_WORD": " -.:/",
    "CATEGORY_SPACE": " ",
    "CATEGORY_NOT_SPACE": string.ascii_letters + string.digits,
}
#: Longest string a quantifier is stretched to while aiming at ``minLength``.
_MAX_STRETCH = 4096


#: The same properties in plain ASCII: what generated strings are made of (readable, and valid
#: under either reading of the pattern).
_ASCII = {"L": "A-Za-z", "Letter": "A-Za-z", "Alphabetic": "A-Za-z", "Lu": "A-Z", "Uppercase_Letter": "A-Z",
          "Ll": "a-z", "Lowercase_Letter": "a-z"}


def translate(pattern: str, *, ascii_only: bool = False) -> str:
    """``pattern`` in Python's ``re`` syntax: Unicode property escapes and JavaScript's named groups
    rewritten (a property inside a class joins that class; outside it becomes a class of its own).
    ``ascii_only``: letters as ASCII letters (for generating, not for checking)."""

    def prop(m: re.Match[str], inside: bool) -> str:
        body = (_ASCII.get(m.group(2)) if ascii_only else None) or _PROPERTIES.get(m.group(2))
        if body is None:
            return "." if not inside else r"\w"
        negated = m.group(1) == "P"
        if inside:
            # Within [...] only a positive, non-negated body can be spliced in.
            return body if not body.startswith("^") and not negated else r"\w"
        if body.startswith("^"):
            body, negated = body[1:], not negated
        return f"[{'^' if negated else ''}{body}]"

    out: list[str] = []
    i, depth = 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            m = _PROPERTY.match(pattern, i)
            if m:
                out.append(prop(m, depth > 0))
                i = m.end()
                continue
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if c == "[" and depth == 0:
            depth = 1
        elif c == "]" and depth:
            depth = 0
        out.append(c)
        i += 1
    return _NAMED_GROUP.sub("(?P<", "".join(out))


@functools.lru_cache(maxsize=2048)
def compiled(pattern: str) -> re.Pattern[str] | None:
    """The compiled (translated) pattern, or None when even the translation is not a regex."""
    try:
        return re.compile(translate(pattern))
    except (re.error, RecursionError, OverflowError, ValueError):
        return None


def _parse(pattern: str, *, ascii_only: bool = False) -> Any:
    from re import _parser as sre_parse  # type: ignore[attr-defined]  # the stdlib's regex parser (3.11+)

    return sre_parse.parse(translate(pattern, ascii_only=ascii_only))


@functools.lru_cache(maxsize=2048)
def is_safe(pattern: str) -> bool:
    """Whether matching is bounded for any input: no quantified group that itself holds an
    unbounded quantifier or an alternation, and no back-reference."""
    try:
        parsed = _parse(pattern)
    except (ImportError, re.error, RecursionError, OverflowError, ValueError):
        return False

    def walk(items: Any, in_repeat: bool) -> bool:
        for op, av in items:
            kind = str(op)
            if kind in ("GROUPREF", "GROUPREF_EXISTS"):
                return False
            if kind in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                lo, hi, sub = av
                unbounded = hi > 1
                if in_repeat and unbounded:
                    return False
                if unbounded and _separated(sub):
                    continue  # (\.[a-z]+)*: each round starts with what the inner run cannot match
                if not walk(sub, in_repeat or unbounded):
                    return False
            elif kind in ("SUBPATTERN", "ATOMIC_GROUP"):
                if not walk(av[-1], in_repeat):
                    return False
            elif kind == "BRANCH":
                if in_repeat and len(av[1]) > 1:
                    return False
                if not all(walk(b, in_repeat) for b in av[1]):
                    return False
            elif kind in ("ASSERT", "ASSERT_NOT"):
                if not walk(av[1], in_repeat):
                    return False
        return True

    return walk(parsed, False)


def _chars(item: Any) -> set[str] | None:
    """The characters one literal or class matches (None: anything else)."""
    op, av = item
    if str(op) == "LITERAL":
        return {chr(av)}
    if str(op) == "IN":
        try:
            chars = _class_chars(av)
        except _Unsupported:
            return None
        return set(chars) if not any(str(o) == "NEGATE" for o, _ in av) else None
    return None


def _separated(body: Any) -> bool:
    """Whether a repeated body is a separator followed by simple runs that cannot match the
    separator: then each repetition can start in one place only, and matching stays linear."""
    items = list(body)
    if items and str(items[0][0]) == "SUBPATTERN":
        items = list(items[0][1][-1])
    if len(items) < 2:
        return False
    for sep, rest in ((items[0], items[1:]), (items[-1], items[:-1])):
        first = _chars(sep)
        if first and _runs_avoid(rest, first):
            return True
    return False


def _runs_avoid(items: list[Any], first: set[str]) -> bool:
    for op, av in items:
        if str(op) in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            inner = list(av[2])
            chars = _chars(inner[0]) if len(inner) == 1 else None
            if chars is None or chars & first:
                return False
        elif _chars((op, av)) is None:
            return False
    return True


class _Unsupported(Exception):
    pass


def _class_chars(items: list[tuple[Any, Any]]) -> str:
    """The characters of a ``[...]`` class (negated: the printable ones it excludes)."""
    chars: list[str] = []
    negate = False
    for op, av in items:
        kind = str(op)
        if kind == "NEGATE":
            negate = True
        elif kind == "LITERAL":
            chars.append(chr(av))
        elif kind == "RANGE":
            lo, hi = av
            chars.extend(chr(c) for c in range(lo, min(hi, lo + 200) + 1))
        elif kind == "CATEGORY":
            chars.extend(_CATEGORIES.get(str(av), ""))
        else:
            raise _Unsupported(kind)
    if negate:
        excluded = set(chars)
        return "".join(c for c in _PRINTABLE if c not in excluded)
    return "".join(chars)


class _Emitter:
    """One attempt at a matching string. ``stretch`` is how far beyond its minimum a quantifier may
    repeat at random; ``target`` the length wanted at least (``minLength``): a quantifier repeats
    as often as the characters still missing, after what must follow it, ask for."""

    def __init__(self, r: random.Random, stretch: int, target: int) -> None:
        self.r, self.stretch, self.target = r, stretch, target
        self.out: list[str] = []

    def emit(self, parsed: Any, tail: int = 0) -> None:
        r = self.r
        for index, (op, av) in enumerate(parsed):
            kind = str(op)
            if kind == "LITERAL":
                self.out.append(chr(av))
            elif kind == "NOT_LITERAL":
                self.out.append(r.choice([c for c in _PRINTABLE if c != chr(av)]))
            elif kind == "ANY":
                self.out.append(r.choice(string.ascii_letters))
            elif kind == "IN":
                chars = _class_chars(av)
                if not chars:
                    raise _Unsupported("empty class")
                self.out.append(r.choice(chars))
            elif kind in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                lo, hi, sub = av
                after = _min_width(parsed[index + 1:]) + tail
                width = max(1, _min_width(sub))
                extra = r.randint(0, max(0, min(hi - lo, self.stretch)))
                missing = self.target - len(self.out) - after - lo * width
                if missing > 0 and hi > lo:
                    extra = max(extra, min(hi - lo, -(-missing // width), _MAX_STRETCH))
                for _ in range(lo + extra):
                    self.emit(sub, after)
                    if len(self.out) > _MAX_STRETCH:
                        break
            elif kind in ("SUBPATTERN", "ATOMIC_GROUP"):
                self.emit(av[-1], _min_width(parsed[index + 1:]) + tail)
            elif kind == "BRANCH":
                self.emit(r.choice(av[1]), _min_width(parsed[index + 1:]) + tail)
            elif kind in ("AT", "ASSERT", "ASSERT_NOT"):
                continue  # anchors hold by construction; look-arounds are checked afterwards
            else:
                raise _Unsupported(kind)


def _min_width(items: Any) -> int:
    try:
        return int(min(items.getwidth()[0], _MAX_STRETCH))
    except (AttributeError, TypeError, ValueError, OverflowError):
        return 0


def pattern_value(pattern: str, r: random.Random, min_len: int | None = None,
                  max_len: int | None = None) -> str | None:
    """A string matching ``pattern`` whose length is within ``[min_len, max_len]``, or None when
    the pattern uses what cannot be generated (back-references) or no try met every condition."""
    regex = compiled(pattern)
    if regex is None:
        return None
    try:
        parsed = _parse(pattern, ascii_only=True)
    except (ImportError, re.error, RecursionError, OverflowError, ValueError):
        return None
    lo = min_len or 0
    hi = max_len if max_len is not None else None
    for attempt in range(24):
        stretch = (3, 0, 1, 6, 12)[attempt] if attempt < 5 else 3
        emitter = _Emitter(r, stretch, lo)
        try:
            emitter.emit(parsed)
        except (_Unsupported, ValueError, IndexError, TypeError, RecursionError):
            return None
        value = "".join(emitter.out)
        if len(value) < lo or (hi is not None and len(value) > hi):
            continue
        try:
            if regex.search(value):
                return value
        except RecursionError:
            return None
    return _padded(pattern, regex, r, lo, hi)


def _padded(pattern: str, regex: re.Pattern[str], r: random.Random, lo: int, hi: int | None) -> str | None:
    """For a pattern not anchored at its end (``^tt[0-9]{7}``), a match with letters appended
    until ``min_len``: ``search`` still finds the match at its start."""
    if pattern.rstrip().endswith("$") or pattern.endswith("\\Z"):
        return None
    value = pattern_value(pattern, r, None, hi)
    if value is None:
        return None
    value += "".join(r.choice(string.ascii_lowercase) for _ in range(max(0, lo - len(value))))
    if hi is not None and len(value) > hi:
        return None
    return value if regex.search(value) else None
