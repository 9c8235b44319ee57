"""What a Python function's docstring says about it: its purpose, each parameter, its result.

A function given as a tool (``protocols.functions``) is described to the model from its
docstring, the way an OpenAPI operation is described from its spec. ``parse_docstring`` reads
the three styles in common use and keeps what a tool protocol needs:

- ``summary``: the first paragraph (lines joined), the tool's description;
- ``params``: a note per parameter name, from a Google section (``Args:``, ``Arguments:``,
  ``Parameters:``, ``Keyword Args:``; entries ``name (type): text`` or ``name: text`` with
  indented continuation lines), a NumPy section (``Parameters`` over a ``----------`` rule;
  ``name : type`` then indented text), or reST/Sphinx fields (``:param name: text``,
  ``:param type name: text``);
- ``returns``: the text of a ``Returns:`` / ``Returns`` / ``:returns:`` section (the response
  schema's description).

Other sections (``Raises``, ``Examples``, ``Note``...) end the parts above and are left out.
Nothing here raises: a docstring in no known style gives its first paragraph and nothing else.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

__all__ = ["Docstring", "parse_docstring"]

#: Google-style section headers (a word or two and a colon alone on a line), by what they hold.
_PARAM_SECTIONS = frozenset({"args", "arguments", "parameters", "params", "keyword args", "keyword arguments",
                             "kwargs", "other parameters"})
_RETURN_SECTIONS = frozenset({"returns", "return", "yields", "yield"})
_OTHER_SECTIONS = frozenset({"raises", "raise", "except", "exceptions", "examples", "example", "note", "notes",
                             "see also", "warning", "warnings", "todo", "references", "attributes", "methods"})
_GOOGLE_HEADER = re.compile(r"^([A-Za-z][A-Za-z ]{1,30}):\s*$")
_NUMPY_RULE = re.compile(r"^\s*-{3,}\s*$")
_GOOGLE_ENTRY = re.compile(r"^\*{0,2}(?P<name>[A-Za-z_]\w*)\s*(\((?P<type>[^)]*)\))?\s*:\s*(?P<text>.*)$")
_NUMPY_ENTRY = re.compile(r"^\*{0,2}(?P<name>[A-Za-z_]\w*)\s*(:\s*(?P<type>.*))?$")
_SPHINX_FIELD = re.compile(r"^:(?P<kind>param|parameter|arg|argument|key|keyword|returns?|rtype|type|raises?)"
                           r"(?P<rest>[^:]*):\s*(?P<text>.*)$")


@dataclass
class Docstring:
    """The parts of a docstring a tool protocol uses (see the module docstring)."""

    summary: str = ""
    params: dict[str, str] = field(default_factory=dict)
    returns: str = ""


def _join(lines: list[str]) -> str:
    return " ".join(" ".join(line.split()) for line in lines if line.strip()).strip()


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _first_paragraph(lines: list[str]) -> str:
    out: list[str] = []
    for line in lines:
        if not line.strip():
            if out:
                break
            continue
        if _GOOGLE_HEADER.match(line.strip()) and line.strip()[:-1].lower() in \
                _PARAM_SECTIONS | _RETURN_SECTIONS | _OTHER_SECTIONS or line.lstrip().startswith(":"):
            break
        out.append(line)
    return _join(out)


def _sections(lines: list[str]) -> list[tuple[str, list[str], bool]]:
    """(lower-case header, body lines, NumPy style?) of every Google or NumPy section, in order."""
    found: list[tuple[str, list[str], bool]] = []
    i = 0
    current: tuple[str, list[str], bool] | None = None
    while i < len(lines):
        line = lines[i].rstrip()
        stripped = line.strip()
        numpy = i + 1 < len(lines) and _NUMPY_RULE.match(lines[i + 1]) and stripped and not stripped.startswith("-")
        google = _GOOGLE_HEADER.match(stripped) if _indent(line) == 0 or current is None else None
        title = stripped.lower() if numpy else (google.group(1).lower() if google else None)
        if title is not None and title in _PARAM_SECTIONS | _RETURN_SECTIONS | _OTHER_SECTIONS:
            current = (title, [], bool(numpy))
            found.append(current)
            i += 2 if numpy else 1
            continue
        if current is not None:
            current[1].append(line)
        i += 1
    return found


def _entries(lines: list[str], numpy: bool) -> dict[str, str]:
    """Parameter notes of a Google or NumPy section body (a NumPy entry line names the type, its
    note is on the indented lines below it)."""
    out: dict[str, str] = {}
    base = min((_indent(b) for b in lines if b.strip()), default=0)
    name: str | None = None
    text: list[str] = []

    def flush() -> None:
        if name is not None:
            out[name] = _join(text)

    for line in lines:
        if not line.strip():
            continue
        if _indent(line) <= base:
            stripped = line.strip()
            match = (_NUMPY_ENTRY if numpy else _GOOGLE_ENTRY).match(stripped)
            if match is not None:
                flush()
                name = match.group("name")
                text = [] if numpy else [match.group("text")]
                continue
        if name is not None:
            text.append(line)
    flush()
    return out


def _sphinx(lines: list[str], doc: Docstring) -> None:
    kind: str | None = None
    name = ""
    text: list[str] = []

    def flush() -> None:
        if kind in ("param", "parameter", "arg", "argument", "key", "keyword") and name:
            doc.params.setdefault(name, _join(text))
        elif kind in ("return", "returns") and not doc.returns:
            doc.returns = _join(text)

    for line in lines:
        match = _SPHINX_FIELD.match(line.strip())
        if match is not None:
            flush()
            kind = match.group("kind")
            words = match.group("rest").split()
            name = words[-1].lstrip("*") if words else ""
            text = [match.group("text")]
        elif kind is not None and line.strip() and _indent(line) > 0:
            text.append(line)
        elif kind is not None:
            flush()
            kind = None
    flush()


def parse_docstring(text: str | None) -> Docstring:
    """The summary, parameter notes and result note of ``text`` (see the module docstring)."""
    if not text or not text.strip():
        return Docstring()
    lines = inspect.cleandoc(text).splitlines()
    doc = Docstring(summary=_first_paragraph(lines))
    for title, body, numpy in _sections(lines):
        if title in _PARAM_SECTIONS:
            for key, note in _entries(body, numpy).items():
                doc.params.setdefault(key, note)
        elif title in _RETURN_SECTIONS and not doc.returns:
            kept = [b for b in body if b.strip()]
            # NumPy names the returned value's type on the first line ("list of dict"): keep the prose
            if numpy and len(kept) > 1 and _indent(kept[0]) < _indent(kept[1]):
                kept = kept[1:]
            doc.returns = _join(kept)
    _sphinx(lines, doc)
    return doc
