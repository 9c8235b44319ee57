"""Black-box probing: document an API collection by calling it (``atc probe``).

    from probes import probe
    report = probe("spec.json", base_url="http://127.0.0.1:8000", no_llm=True, out="probed/")

The room, in the order data flows through it: ``naming`` (what names mean), ``values`` (arguments
made from schemas), ``calls`` (budget, cache, gateway, what an answer means) with ``cache``,
``harvest`` (values seen in responses and how they fit parameters), ``planner`` (coherent
arguments), ``chain`` (the model-free chain of probing) and ``llm`` (the model's rounds),
``findings`` (how each tool was documented, for re-runs), ``state`` and ``document`` (from
responses to protocols), ``outputs`` and ``components`` (OpenAPI with its named schemas,
Markdown, store), ``safety`` (the one "may we call this" decision) and ``postreads`` (reads by
POST), the writes of ``--allow-unsafe`` -- ``actions`` (what a write does), ``scope``, ``plan``,
``filling``, ``announce``, ``writes`` (sending the plan), ``created`` (what the probe can show it
made) and ``guard`` (the scope guard at the gateway, on every write and redirect hop) --, ``report``
(the result dataclasses), ``single`` (one probe in this process), ``many`` and ``spread`` (tasks on an
executor) and ``probing`` (the entry point above them). Names are imported lazily so that
importing one module stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from probes.many import probe_many
    from probes.plan.safety import Safety, call_safety
    from probes.probing import probe
    from probes.results.report import ProbeInterrupted, ProbeReport, ProbeSettings, ToolReport

_LAZY: dict[str, str] = {
    "probe": "probes.probing",
    "probe_many": "probes.many",
    "ProbeReport": "probes.results.report",
    "ToolReport": "probes.results.report",
    "ProbeSettings": "probes.results.report",
    "ProbeInterrupted": "probes.results.report",
    "call_safety": "probes.plan.safety",
    "Safety": "probes.plan.safety",
}

__all__ = ["ProbeInterrupted", "ProbeReport", "ProbeSettings", "Safety", "ToolReport", "call_safety", "probe", "probe_many"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'probes' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
