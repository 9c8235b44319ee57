"""``atc eval``: benchmark suites run with one or more strategies on the same tools and budgets,
scored as the Chain-of-Tools paper and ToolBench's ToolEval score them.

Modules: ``suite`` (tasks with gold solutions, the suite JSONL and manifest), ``readers``
(RestBench, the ToolFlow example sets, ToolBench/StableToolBench), ``gold`` and ``metrics``
(Path%, Prec%, costs: pure functions over recorded runs), ``judge`` (ToolEval's pass rate and
win rate with a judge model), ``mockhub`` (``atc mock`` of every collection on one port),
``runner`` (the strategies through the batch runner), ``scoring`` (runs -> scores, verdicts
kept), ``report`` (Markdown, JSON, chart), ``api`` (``load_suite``, ``evaluate``).

    from atc.evaluation import load_suite, evaluate, RunSettings
    result = evaluate(load_suite("examples"), RunSettings(strategies=["chain"]), out="eval-out")
    print(result.to_dict()["strategies"]["chain"]["path"])
"""

from __future__ import annotations

from atc.evaluation.api import JudgeOptions, evaluate, load_suite, make_judge
from atc.evaluation.runner import RunSettings
from atc.evaluation.scoring import EvalResult
from atc.evaluation.suite import EvalTask, Suite

__all__ = ["load_suite", "evaluate", "make_judge", "JudgeOptions", "RunSettings", "EvalResult", "EvalTask", "Suite"]
