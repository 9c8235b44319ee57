"""Tasks of a batch on a Ray cluster (``--executor ray``; ``pip install 'atc[ray]'``).

Each Ray task runs ``Job.run`` in a worker process: the worker has its own sandbox backend (kept
warm across the tasks it runs) and its own model client, made from its environment. What is
shipped is the ``Job`` -- tools, limits, names -- and the ``Task``: never a secret. Credentials
stay environment variable NAMES in the toolset (``env:VAR``); their values, and the model
server's settings (``OPENAI_*``, ``ATC_MODEL``), reach the workers through the job's runtime
environment when this process starts or joins the cluster (they are part of the cluster's job
configuration, not of any task's arguments), or are already set on the workers' machines.

At most ``concurrency`` tasks are in flight; each result is handed to ``on_outcome`` as it comes
back, so the caller writes it at once; the caller orders them by index.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from typing import Any

from atc.loop.solving import Solution
from atc.workflows.executors import RAY_INSTALL, run_each
from atc.workflows.jobs import Job, Outcome
from atc.workflows.tasks import Task
from sandbox.api import ErrorInfo, ExecutionResult
from sandbox.gateway.http.credentials import env_var

__all__ = ["run_on_ray", "INSTALL", "shipped_env", "worker_env", "MODEL_VARS"]

INSTALL = RAY_INSTALL
#: Model settings a worker needs to make its client (read there, from the runtime environment).
MODEL_VARS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ATC_MODEL", "ATC_MODEL_CLIENT", "ATC_HOME")


def shipped_env(job: Job) -> dict[str, str]:
    """The environment the workers need: the model settings, and the variables the toolset's
    credentials name (values read here, on the host that started the batch)."""
    return worker_env(job.toolset.credentials.values())


def worker_env(credential_sources: Iterable[str]) -> dict[str, str]:
    """``MODEL_VARS`` and the variables that ``env:VAR`` credential sources name, with their
    values on this host (unset ones left out)."""
    names = set(MODEL_VARS) | {env_var(source) for source in credential_sources}
    return {name: os.environ[name] for name in sorted(names) if os.environ.get(name)}


def _run_task(job: Job, task: Task) -> Outcome:
    return job.run(task)


def run_on_ray(todo: list[tuple[int, Task]], job: Job, *, concurrency: int, on_outcome: Any,
               stop: threading.Event, address: str | None = None) -> int:
    """Run ``todo`` on Ray; returns how many finished. A worker failure (a worker process lost)
    comes back as a failed outcome of its task, never as a crash of the batch."""
    if not todo:
        return 0
    shipped = job.shippable()
    tasks = {index: task for index, task in todo}
    return run_each(_run_task, [t for _, t in todo], shared=shipped, indexes=[i for i, _ in todo],
                    on_result=on_outcome, on_error=lambda i, exc: on_outcome(i, _failed(tasks[i], exc)),
                    executor="ray", concurrency=concurrency, stop=stop, address=address, env=shipped_env(shipped))


def _failed(task: Task, exc: BaseException) -> Outcome:
    message = f"the Ray worker failed: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    if task.query is not None:
        return Outcome(task, Solution.failed(task.query, RuntimeError(message)))
    return Outcome(task, ExecutionResult(ok=False, answer="", sandbox="", duration_ms=0.0,
                                         error=ErrorInfo("SandboxError", message)))
