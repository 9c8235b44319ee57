"""``solve_many``: many tasks solved at once, as a batch (``atc.workflows.batch``), from Python.

It lives with the batch it runs rather than with ``solve``: the batch runs ``atc.loop.solving.solve``
for each task, so this room depends on ``atc.loop.solving`` and never the other way round.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from atc.errors import UsageError
from atc.loop.answers import json_value
from atc.loop.solving import Solution, ToolsArg, toolset_for
from atc.workflows.batch import run_batch
from atc.workflows.jobs import Job, Outcome
from atc.workflows.outfile import ResultLog
from atc.workflows.tasks import Task
from sandbox.api import Limits
from sandbox.execute import pick_sandbox

__all__ = ["solve_many", "ResultHook", "Solutions"]

#: ``on_result(index, solution)`` of ``solve_many``: called as each task finishes.
ResultHook = Callable[[int, Solution], None]


class Solutions(list[Solution]):
    """What ``solve_many`` returns: the solutions in the order of the queries (a list), with the
    tasks' ``ids``, and ``to_pandas()`` for the next step of a pipeline."""

    def __init__(self, items: Sequence[Solution] = (), ids: Sequence[str | int] | None = None) -> None:
        super().__init__(items)
        self.ids = list(ids) if ids is not None else list(range(len(self)))

    def to_pandas(self) -> Any:
        """A pandas ``DataFrame``, one row per task, indexed by its id: the typed answer's fields
        as columns (a value that is not an object is the column ``value``; a field named like one
        of the columns after it is ``value.NAME``), then ``ok``, ``answer``, ``error`` (type:
        message), ``query``, ``strategy``, ``steps``, ``api_calls``, ``model_calls``,
        ``prompt_tokens``, ``completion_tokens`` and ``duration_ms``. Needs pandas."""
        try:
            # pandas: about 500 ms to import; only this reader needs it
            import pandas
        except ImportError:
            raise UsageError("Solutions.to_pandas needs pandas", hint="pip install pandas") from None
        rows = []
        for solution in self:
            error = solution.error or {}
            info: dict[str, Any] = {
                "ok": solution.ok, "answer": solution.answer,
                "error": f"{error.get('type')}: {error.get('message')}" if error else None, "query": solution.query,
                "strategy": solution.strategy, "steps": solution.steps, "api_calls": solution.api_calls,
                "model_calls": solution.usage.llm_calls, "prompt_tokens": solution.usage.prompt_tokens,
                "completion_tokens": solution.usage.completion_tokens, "duration_ms": round(solution.duration_ms, 3)}
            value = json_value(solution.value) if solution.value is not None else None
            fields = {(f"value.{k}" if k in info else str(k)): v for k, v in value.items()} \
                if isinstance(value, dict) else {"value": value}
            rows.append({**fields, **info})
        frame = pandas.DataFrame(rows, index=pandas.Index(self.ids[:len(rows)], name="id"))
        return frame


def solve_many(
    queries: Sequence[str],
    tools: ToolsArg,
    *,
    concurrency: int = 8,
    ids: Sequence[str | int] | None = None,
    out: str | Path | None = None,
    on_result: ResultHook | None = None,
    executor: str = "local",
    record: str | Path | None = None,
    replay: str | Path | None = None,
    **kw: Any,
) -> Solutions:
    """Solve many tasks at once, at most ``concurrency`` at a time (so at most that many
    sandboxes run together); results come back in the order of ``queries``. A task that raises
    becomes a ``Solution`` with ``ok`` False and the error, never sinking the batch. Missing model
    configuration is raised at once, since no task could run.

    ``out``: a JSON Lines file where each finished task's line (``{"id", ...solve --json}``) is
    appended and fsynced as it finishes; tasks whose id is already there are not run again (their
    Solution is read back from the file), so an interrupted call resumes where it stopped. ``ids``
    name the tasks (default: their index). ``on_result(index, solution)`` is called as each task
    finishes (progress). ``executor``: ``"local"`` (threads here) or ``"ray"`` (a Ray cluster:
    ``RAY_ADDRESS``, else a local one; the model client is made on each worker from ``model`` and
    its environment). ``record``/``replay``: a directory to record the tools' and the model's
    answers into, or to answer from (``atc.workflows.replay``). ``writes``/``approve`` are the
    write policy of every task, each task with its own write ledger, kept beside ``out``
    (``OUT.writes.jsonl``, or ``ledger=FILE``) so that a resumed task does not write twice. Other keywords are ``solve``'s
    (``strategy``, ``max_model_calls``, ``max_tokens``, ``max_steps``, ``answer``...), the same for
    every task. The result is a ``Solutions`` list: ``.to_pandas()`` makes it a DataFrame.

    Args:
        queries: the tasks.
        tools: as for ``atc.solve``.
        concurrency: tasks run together.
        ids: the tasks' names (default: their index).
        out: a JSON Lines file of results, read back to resume.
        on_result: called with ``(index, solution)`` as each task finishes.
        executor: ``"local"`` or ``"ray"``.
        record: a directory to record the answers of tools and model into; ``replay``: to answer from.
        **kw: ``atc.solve``'s keywords, the same for every task.

    Returns:
        The ``Solutions``, in the order of ``queries``.

    Raises:
        UsageError: bad batch settings (``concurrency``, ``ids``) or tools.
        ConfigError: no model configured (no task could run).
    """
    if concurrency < 1:
        raise UsageError("concurrency must be at least 1")
    if ids is not None and len(ids) != len(queries):
        raise UsageError(f"ids has {len(ids)} items for {len(queries)} queries")
    names = list(ids) if ids is not None else list(range(len(queries)))
    if len({str(i) for i in names}) != len(names):
        raise UsageError("ids must be unique")
    toolset = toolset_for(tools, kw.pop("base_url", None), kw.pop("credentials", None), kw.pop("validation", None))
    sandbox = pick_sandbox(kw.pop("sandbox", None), kw.pop("backend", None))
    named = {k: kw.pop(k) for k in ("model", "client", "max_reflections", "limits", "top_k", "on_attempt", "writes",
                                    "approve", "ledger") if k in kw}
    job = Job(toolset, named.get("limits") or Limits(), sandbox=sandbox,
              model=named.get("model"), max_reflections=named.get("max_reflections", 3), top_k=named.get("top_k"),
              record=str(record) if record else None, replay=str(replay) if replay else None,
              client=named.get("client"), on_attempt=named.get("on_attempt"), solve_options=kw,
              writes=named.get("writes") or "allow", approve=named.get("approve"),
              ledger=str(named["ledger"]) if named.get("ledger") else None)
    tasks = [Task(name, query=query) for name, query in zip(names, queries, strict=True)]
    if not tasks:
        return Solutions()
    results: list[Solution | None] = [None] * len(tasks)

    def finished(index: int, outcome: Outcome) -> None:
        assert isinstance(outcome.result, Solution)
        results[index] = outcome.result
        if on_result is not None:
            on_result(index, outcome.result)

    log = ResultLog(out) if out is not None else None
    try:
        run_batch(tasks, job, log=log, concurrency=concurrency, executor=executor, on_outcome=finished)
    finally:
        if log is not None:
            log.close()
    for index, task in enumerate(tasks):
        if results[index] is None and log is not None and task.key in log.done:
            results[index] = Solution.from_dict(log.done[task.key])
    return Solutions([r if r is not None else Solution.failed(t.query or "", UsageError("not run"))
                      for r, t in zip(results, tasks, strict=True)], names)
