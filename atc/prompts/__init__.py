"""Prompt templates, kept as package data (``atc/prompts/*.md``) rather than strings in code.

A template is Markdown with ``{{name}}`` placeholders; double braces because the prompts quote
Python and JSON, whose single braces must pass through untouched. ``render`` refuses a template
whose placeholders it was not given values for, and values it has no placeholder for, so a
renamed placeholder fails in tests instead of silently sending a prompt with a hole in it.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

__all__ = ["load", "render", "placeholders"]

_PLACEHOLDER = re.compile(r"\{\{\s*([a-z_][a-z0-9_]*)\s*\}\}")


@cache
def load(name: str) -> str:
    """The text of ``atc/prompts/<name>.md``."""
    return resources.files(__package__).joinpath(f"{name}.md").read_text(encoding="utf-8")


def placeholders(name: str) -> set[str]:
    return set(_PLACEHOLDER.findall(load(name)))


def render(name: str, **values: str) -> str:
    """Template ``name`` with every ``{{key}}`` replaced by ``values[key]`` (trailing space trimmed)."""
    template = load(name)
    wanted = set(_PLACEHOLDER.findall(template))
    missing, extra = wanted - values.keys(), values.keys() - wanted
    if missing or extra:
        raise ValueError(f"prompt {name!r}: missing values {sorted(missing)}, unknown values {sorted(extra)}")
    text = _PLACEHOLDER.sub(lambda m: values[m.group(1)], template).strip()
    return re.sub(r"\n{3,}", "\n\n", text) + "\n"  # an empty value leaves no gap behind
