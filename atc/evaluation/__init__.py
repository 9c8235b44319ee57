"""``atc eval``: benchmark suites run with one or more strategies on the same tools and budgets,
scored as the Chain-of-Tools paper and ToolBench's ToolEval score them.

Modules: ``suite`` (tasks with gold solutions, the suite JSONL and manifest), ``readers``
(RestBench with its 20 candidates a task, the ToolFlow published examples, ToolBench /
StableToolBench), ``gold`` and ``metrics`` (Path%, Prec%, RestGPT's correct path and extra calls,
exec success, costs: pure functions over recorded runs, every requested call counted), ``labels``
(fenced data in, structured labels out) and ``judge`` (ToolEval's two-phase pass rate, scored
per vote as StableToolBench does, and its win rate), ``mockhub`` (``atc mock`` of every collection
on one port), ``runner`` (the strategies, their settings resolved once, through the batch runner),
``scoring`` (runs -> scores, verdicts kept), ``report`` (Markdown, JSON, chart), ``api``
(``load_suite``, ``evaluate``).

    from atc.evaluation import load_suite, evaluate, RunSettings
    result = evaluate(load_suite("examples"), RunSettings(strategies=["chain"]), out="eval-out")
    print(result.to_dict()["strategies"]["chain"]["path"])
"""

from __future__ import annotations

from atc.evaluation.api import JudgeOptions, evaluate, load_suite, make_judge
from atc.evaluation.execution import RunSettings
from atc.evaluation.scoring import EvalResult
from atc.evaluation.suite import EvalTask, Suite

__all__ = ["load_suite", "evaluate", "make_judge", "JudgeOptions", "RunSettings", "EvalResult", "EvalTask", "Suite"]
