"""Re-Invoke's synthetic queries: user requests a model writes for each tool at index time, kept
in ``ATC_HOME/retrieval/queries/`` so that they are paid for once.

Each tool's queries are stored under a hash of its document (what the model was shown, plus the
prompt's version), one small JSON file per document, written atomically: a tool whose document
did not change is never asked about again, an interrupted generation keeps every batch it
finished, and running it again does only the rest. Generation sends several tools per request
(``batch``) and runs a few requests at once (``concurrency``); its model usage is reported.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from atc import prompts
from atc.errors import ModelError
from atc.llm.chat import ModelClient
from protocols.files import atomic_write
from protocols.model import Tool

__all__ = ["QueryStore", "GenerationReport", "tool_document", "generate", "PROMPT_VERSION"]

#: Bumped when the generation prompt changes meaning, so that old queries are not reused.
PROMPT_VERSION = "1"
_LINE = re.compile(r"^\s*(?:[-*]\s*)?\(?(\d+)\)?\s*[:.)]\s*(.+?)\s*$")

Progress = Callable[[int, int], None]


def tool_document(tool: Tool) -> str:
    """The text a model reads to imagine requests for ``tool`` (and Re-Invoke's document view)."""
    params = []
    for name, schema in list(tool.properties.items())[:12]:
        desc = schema.get("description", "") if isinstance(schema, dict) else ""
        params.append(f"{name}{' (required)' if name in tool.required else ''}{': ' + desc[:120] if desc else ''}")
    where = " / ".join(p for p in (tool.category, tool.group) if p)
    lines = [f"API: {tool.name}" + (f" ({where})" if where else ""), " ".join(tool.description.split())[:800]]
    if params:
        lines.append("Parameters: " + "; ".join(params))
    return "\n".join(line for line in lines if line)


def document_hash(tool: Tool) -> str:
    return hashlib.sha256(f"{PROMPT_VERSION}\n{tool_document(tool)}".encode()).hexdigest()


class QueryStore:
    """The stored queries under ``home/retrieval/queries``."""

    def __init__(self, home: str | Path) -> None:
        self.dir = Path(home).expanduser() / "retrieval" / "queries"

    def _path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def entry(self, key: str) -> tuple[list[str], int] | None:
        """(stored queries, how many were asked for), or None."""
        try:
            doc = json.loads(self._path(key).read_bytes())
        except (OSError, ValueError):
            return None
        queries = doc.get("queries") if isinstance(doc, dict) else None
        if not isinstance(queries, list):
            return None
        asked = doc.get("asked")
        return [q for q in queries if isinstance(q, str)], asked if isinstance(asked, int) else len(queries)

    def get(self, key: str) -> list[str] | None:
        found = self.entry(key)
        return found[0] if found else None

    def put(self, key: str, tool: Tool, queries: list[str], model: str, asked: int = 0) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps({"tool": tool.name, "collection": tool.collection, "model": model,
                           "prompt_version": PROMPT_VERSION, "asked": asked or len(queries),
                           "queries": queries}, ensure_ascii=False).encode()
        atomic_write(path, data)


@dataclass
class GenerationReport:
    """What one generation did; ``to_dict()`` is ``atc tools queries --json``."""

    tools: int = 0
    cached: int = 0
    generated: int = 0
    failed: int = 0
    usage: dict[str, int] = field(default_factory=lambda: {"llm_calls": 0, "prompt_tokens": 0,
                                                           "completion_tokens": 0})
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": not self.errors and not self.failed, "tools": self.tools, "cached": self.cached,
                "generated": self.generated, "failed": self.failed, "usage": dict(self.usage),
                "errors": list(self.errors)}


def parse_numbered(text: str, count: int) -> dict[int, list[str]]:
    """``{number: [queries]}`` from lines like ``2: find ...`` (numbers 1..count only)."""
    out: dict[int, list[str]] = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if m and 1 <= int(m.group(1)) <= count:
            query = m.group(2).strip().strip('"').strip()
            if query:
                out.setdefault(int(m.group(1)), []).append(query)
    return out


def generate(tools: Sequence[Tool], client: ModelClient, store: QueryStore, *, per_tool: int = 5, batch: int = 8,
             concurrency: int = 4, on_progress: Progress | None = None) -> GenerationReport:
    """Make sure every tool has ``per_tool`` stored queries, asking ``client`` for the missing
    ones. A model failure stops the batches not yet sent (what was stored stays) and is reported
    in ``errors``; tools left out by the model's answer or not sent count as ``failed`` (tried
    again next time). ``usage`` counts the answered requests (a failed one raised before its
    usage was known)."""
    report = GenerationReport()
    todo: dict[str, Tool] = {}
    for tool in tools:
        key = document_hash(tool)
        if key in todo:
            continue
        report.tools += 1
        stored = store.entry(key)
        if stored is not None and max(len(stored[0]), stored[1]) >= per_tool:  # the model wrote fewer: fine
            report.cached += 1
        else:
            todo[key] = tool
    keys = list(todo)
    chunks = [keys[i:i + max(1, batch)] for i in range(0, len(keys), max(1, batch))]
    lock = threading.Lock()
    failed = threading.Event()
    if on_progress:
        on_progress(report.cached, report.tools)

    def one(chunk: list[str]) -> None:
        if failed.is_set():  # the model failed: what is not sent yet waits for the next run
            with lock:
                report.failed += len(chunk)
            return
        docs = "\n\n".join(f"### {i}\n{tool_document(todo[key])}" for i, key in enumerate(chunk, 1))
        text = prompts.render("reinvoke_queries", count=str(len(chunk)), per_tool=str(per_tool), tools=docs)
        try:
            completion = client.complete([{"role": "user", "content": text}])
        except ModelError as exc:
            failed.set()
            with lock:
                report.errors.append(exc.message)
                report.failed += len(chunk)
            return
        found = parse_numbered(completion.text, len(chunk))
        model = getattr(client, "model", "") or ""
        for i, key in enumerate(chunk, 1):
            queries = found.get(i, [])[:per_tool]
            if queries:
                store.put(key, todo[key], queries, model, asked=per_tool)
        with lock:
            report.usage["llm_calls"] += completion.requests
            report.usage["prompt_tokens"] += completion.prompt_tokens
            report.usage["completion_tokens"] += completion.completion_tokens
            done = sum(1 for i in range(1, len(chunk) + 1) if found.get(i))
            report.generated += done
            report.failed += len(chunk) - done
            if on_progress:
                on_progress(report.cached + report.generated + report.failed, report.tools)

    if chunks:
        with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(chunks))),
                                thread_name_prefix="atc-queries") as pool:
            try:
                list(pool.map(one, chunks))
            except BaseException:  # Ctrl-C: the batches in flight finish and are kept, the rest is not sent
                failed.set()
                raise
    return report
