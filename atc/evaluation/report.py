"""The outputs of an evaluation: the strategies side by side as Markdown, JSON and a chart.

Files in ``DIR`` (each written whole to a temporary file and renamed, so a reader never sees half
of one): ``results.jsonl`` (one line per task and strategy: ``id``, ``strategy``, ``ok``,
``answer``, ``calls`` as tool names in order, ``path``, ``precision``, ``success``, the judge's
reason, costs), ``summary.json`` (``atc eval --json``), ``summary.md`` (the table) and
``chart.png`` (success and cost per strategy; needs matplotlib: ``pip install 'atc[eval]'``).
The run files of each strategy are ``runs/STRATEGY.jsonl`` (``atc.evaluation.execution``).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atc.errors import ConfigError
from atc.evaluation.metrics import DEFINITIONS, VARIANTS
from protocols.files import atomic_write

if TYPE_CHECKING:
    from atc.evaluation.metrics import StrategySummary
    from atc.evaluation.scoring import EvalResult

__all__ = ["markdown", "write_outputs", "chart", "success_text", "CHART_INSTALL"]

CHART_INSTALL = "pip install 'atc[eval]'  (matplotlib)"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}"


def success_text(s: StrategySummary, judged: bool) -> str:
    """Success% as the table shows it: ``n/a`` without a judge, ``n/a, k unjudged`` while tasks
    wait for a verdict (never a rate over fewer tasks than were run)."""
    if not judged:
        return "n/a"
    if s.unjudged:
        return f"n/a, {s.unjudged} unjudged"
    return _pct(s.success)


def _settings_text(settings: dict[str, Any] | None) -> str:
    if not settings:
        return "(a plug-in: its own)"
    inner = settings.get("settings") or {}
    runs = f"; rerun up to {settings['runs']} times until it answers" if settings.get("runs", 1) > 1 else ""
    shown = ", ".join(f"{k}={v}" for k, v in inner.items() if k != "profile")
    return f"{settings.get('strategy')}: profile {inner.get('profile', '-')} ({shown}){runs}"


def markdown(result: EvalResult) -> str:
    """The side-by-side table, the definitions, variants, settings, win rates and notes."""
    judged = result.judge is not None
    rows = ["| strategy | tasks | Success% | ± | Path% | Prec% | correct path% | extra calls | exec% | model turns "
            "| HTTP requests | prompt tokens | completion tokens | API calls | requested calls | steps | wall s | failed |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name in result.strategies:
        s = result.summaries.get(name)
        if s is None:
            continue
        per = s.per_task()
        spread = "" if s.success_std is None else f"{100 * s.success_std:.1f}"
        extra = "n/a" if s.extra_calls is None else f"{s.extra_calls:.2f}"
        rows.append(f"| {name} | {s.tasks} | {success_text(s, judged)} | {spread} | {_pct(s.path)} | {_pct(s.precision)} "
                    f"| {_pct(s.correct_path)} | {extra} | {_pct(s.exec_success)} | {per['model_calls']:.2f} "
                    f"| {per['http_requests']:.2f} | {per['prompt_tokens']:.0f} | {per['completion_tokens']:.0f} "
                    f"| {per['api_calls']:.2f} | {per['requested_calls']:.2f} | {per['steps']:.2f} "
                    f"| {per['wall_s']:.2f} | {s.failed} |")
    judge = result.judge
    votes = f" ({judge['votes']} vote{'s' if judge['votes'] != 1 else ''} a task)" if judge else ""
    head = (f"# {result.suite.name}: {len(result.suite.tasks)} tasks\n\n"
            f"Costs are means per task. Success: {'judged by ' + judge['model'] + votes if judge else 'n/a (no judge)'}."
            f" Path% and Prec% count every call the model requested.\n")
    parts = [head, "\n".join(rows)]
    variants = ["| strategy | " + " | ".join(VARIANTS) + " |", "|---|" + "---:|" * len(VARIANTS)]
    for name in result.strategies:
        s = result.summaries.get(name)
        if s is not None:
            cells = [("n/a" if s.variants.get(k) is None else f"{s.variants[k]:.2f}" if k.startswith("extra")
                      else _pct(s.variants.get(k))) for k in VARIANTS]
            variants.append(f"| {name} | " + " | ".join(cells) + " |")
    parts.append("Variants (earlier or other definitions, for comparison):\n\n" + "\n".join(variants))
    if result.win_rates:
        wins = ["| strategy | vs | win | tie | lose | win rate |", "|---|---|---:|---:|---:|---:|"]
        for w in result.win_rates:
            wins.append(f"| {w['strategy']} | {w['baseline']} | {w['win']} | {w['tie']} | {w['lose']} "
                        f"| {_pct(w['win_rate'])} |")
        parts.append("Win rate (ToolEval: ties count half):\n\n" + "\n".join(wins))
    settings = result.settings.get("strategies") if result.settings else None
    if settings:
        parts.append(f"Settings (preset {result.settings.get('preset')}):\n\n"
                     + "\n".join(f"- {n}: {_settings_text(settings.get(n))}" for n in result.strategies))
    failures = {n: s.failures for n, s in result.summaries.items() if s.failures}
    if failures:
        parts.append("Failures by kind:\n\n" + "\n".join(
            f"- {n}: " + ", ".join(f"{k} {v}" for k, v in f.items()) for n, f in failures.items()))
    parts.append("Definitions:\n\n" + "\n".join(f"- {k}: {v}" for k, v in DEFINITIONS.items()))
    notes = result.suite.notes + result.notes
    if notes:
        parts.append("Notes:\n\n" + "\n".join(f"- {n}" for n in notes))
    return "\n\n".join(parts) + "\n"


def chart(result: EvalResult, path: Path) -> None:
    """Success, Path% and Prec% (left) and tokens per task (right), one group per strategy."""
    try:
        # matplotlib: optional (atc[eval]), about 1 s to import; only the chart needs it
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
