"""The outputs of an evaluation: the strategies side by side as Markdown, JSON and a chart.

Files in ``DIR`` (each written whole to a temporary file and renamed, so a reader never sees half
of one): ``results.jsonl`` (one line per task and strategy: ``id``, ``strategy``, ``ok``,
``answer``, ``calls`` as tool names in order, ``path``, ``precision``, ``success``, the judge's
reason, costs), ``summary.json`` (``atc eval --json``), ``summary.md`` (the table) and
``chart.png`` (success and cost per strategy; needs matplotlib: ``pip install 'atc[eval]'``).
The run files of each strategy are ``runs/STRATEGY.jsonl`` (``atc.evaluation.runner``).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atc.errors import ConfigError
from protocols.files import atomic_write

if TYPE_CHECKING:
    from atc.evaluation.scoring import EvalResult

__all__ = ["markdown", "write_outputs", "chart", "CHART_INSTALL"]

CHART_INSTALL = "pip install 'atc[eval]'  (matplotlib)"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}"


def markdown(result: EvalResult) -> str:
    """The side-by-side table, the definitions, win rates and notes."""
    rows = ["| strategy | tasks | Success% | Path% | Prec% | model calls | prompt tokens | completion tokens "
            "| API calls | steps | wall s | failed |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name in result.strategies:
        s = result.summaries.get(name)
        if s is None:
            continue
        per = s.per_task()
        rows.append(f"| {name} | {s.tasks} | {_pct(s.success)} | {_pct(s.path)} | {_pct(s.precision)} "
                    f"| {per['model_calls']:.2f} | {per['prompt_tokens']:.0f} | {per['completion_tokens']:.0f} "
                    f"| {per['api_calls']:.2f} | {per['steps']:.2f} | {per['wall_s']:.2f} | {s.failed} |")
    judge = result.judge
    head = (f"# {result.suite.name}: {len(result.suite.tasks)} tasks\n\n"
            f"Costs are means per task. Success: {'judged by ' + judge['model'] if judge else 'n/a (no judge)'}.\n")
    parts = [head, "\n".join(rows)]
    if result.win_rates:
        wins = ["| strategy | vs | win | tie | lose | win rate |", "|---|---|---:|---:|---:|---:|"]
        for w in result.win_rates:
            wins.append(f"| {w['strategy']} | {w['baseline']} | {w['win']} | {w['tie']} | {w['lose']} "
                        f"| {_pct(w['win_rate'])} |")
        parts.append("Win rate (ToolEval: ties count half):\n\n" + "\n".join(wins))
    failures = {n: s.failures for n, s in result.summaries.items() if s.failures}
    if failures:
        parts.append("Failures by kind:\n\n" + "\n".join(
            f"- {n}: " + ", ".join(f"{k} {v}" for k, v in f.items()) for n, f in failures.items()))
    from atc.evaluation.metrics import DEFINITIONS

    parts.append("Definitions:\n\n" + "\n".join(f"- {k}: {v}" for k, v in DEFINITIONS.items()))
    notes = result.suite.notes + result.notes
    if notes:
        parts.append("Notes:\n\n" + "\n".join(f"- {n}" for n in notes))
    return "\n\n".join(parts) + "\n"


def chart(result: EvalResult, path: Path) -> None:
    """Success, Path% and Prec% (left) and tokens per task (right), one group per strategy."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ConfigError("the chart needs matplotlib, which is not installed", hint=CHART_INSTALL) from exc
    names = [n for n in result.strategies if n in result.summaries]
    summaries = [result.summaries[n] for n in names]
    fig, (quality, cost) = plt.subplots(1, 2, figsize=(4 + 2.2 * len(names), 4.2))
    width = 0.26
    xs = list(range(len(names)))
    for offset, (label, values) in enumerate([("Success%", [s.success for s in summaries]),
                                              ("Path%", [s.path for s in summaries]),
                                              ("Prec%", [s.precision for s in summaries])]):
        pos = [x + (offset - 1) * width for x in xs]
        bars = quality.bar(pos, [100 * (v or 0) for v in values], width, label=label)
        for bar, v in zip(bars, values, strict=True):
            quality.annotate("n/a" if v is None else f"{100 * v:.0f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                             ha="center", va="bottom", fontsize=7)
    quality.set_xticks(xs, names)
    quality.set_ylim(0, 125)
    quality.set_yticks([0, 20, 40, 60, 80, 100])
    quality.set_title("quality (%)")
    quality.legend(fontsize=7, loc="upper center", ncol=3, frameon=False)
    prompt = [s.per_task()["prompt_tokens"] for s in summaries]
    completion = [s.per_task()["completion_tokens"] for s in summaries]
    cost.bar(xs, prompt, 0.5, label="prompt")
    cost.bar(xs, completion, 0.5, bottom=prompt, label="completion")
    for x, s in zip(xs, summaries, strict=True):
        per = s.per_task()
        cost.annotate(f"{per['model_calls']:.1f} calls", (x, per["prompt_tokens"] + per["completion_tokens"]),
                      ha="center", va="bottom", fontsize=7)
    cost.set_xticks(xs, names)
    cost.set_title("tokens per task")
    cost.set_ylim(0, 1.25 * max([p + c for p, c in zip(prompt, completion, strict=True)] + [1]))
    cost.legend(fontsize=7, loc="upper center", ncol=2, frameon=False)
    fig.suptitle(f"{result.suite.name} ({len(result.suite.tasks)} tasks)")
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=110)
    plt.close(fig)
    atomic_write(path, png.getvalue())


def write_outputs(result: EvalResult, out: Path, *, with_chart: bool = True) -> str | None:
    """Write every output file into ``out``; returns why there is no chart (None: there is one).
    The chart is drawn first, so that a chart that cannot be drawn is a note of the summaries
    written after it (``no chart: ...``)."""
    missing = "not asked for" if not with_chart else None
    if with_chart:
        try:
            chart(result, out / "chart.png")
        except ConfigError as exc:
            missing = f"{exc.message} ({exc.hint})"
            result.notes.append(f"no chart: {missing}")
    lines = [json.dumps(score.to_dict(), ensure_ascii=False) for name in result.strategies
             for score in result.scores.get(name, [])]
    atomic_write(out / "results.jsonl", "\n".join(lines) + "\n" if lines else "")
    doc: dict[str, Any] = result.to_dict()
    atomic_write(out / "summary.json", json.dumps(doc, ensure_ascii=False, indent=2) + "\n")
    atomic_write(out / "summary.md", markdown(result))
    return missing
