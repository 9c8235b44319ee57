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
from typing import Any

from atc.errors import ConfigError
from atc.workflows.jobs import Job, Outcome
from atc.workflows.tasks import Task

__all__ = ["run_on_ray", "INSTALL", "shipped_env"]

INSTALL = "pip install 'atc[ray]'  (the ray package)"
#: Model settings a worker needs to make its client (read there, from the runtime environment).
_MODEL_VARS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ATC_MODEL", "ATC_MODEL_CLIENT", "ATC_HOME")


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ConfigError("--executor ray needs Ray, which is not installed", hint=INSTALL) from exc
    return ray


def shipped_env(job: Job) -> dict[str, str]:
    """The environment the workers need: the model settings, and the variables the toolset's
    credentials name (values read here, on the host that started the batch)."""
    from sandbox.http.credentials import env_var

    names = set(_MODEL_VARS) | {env_var(source) for source in job.toolset.credentials.values()}
    return {name: os.environ[name] for name in sorted(names) if os.environ.get(name)}


def _connect(ray: Any, job: Job, address: str | None) -> None:
    """Join ``address`` (``RAY_ADDRESS``), else start a cluster on this machine bound to
    127.0.0.1 only; a caller that started or joined one already keeps it (and its runtime env)."""
    if ray.is_initialized():
        return
    options: dict[str, Any] = {"runtime_env": {"env_vars": shipped_env(job)}, "include_dashboard": False,
                               "log_to_driver": False, "logging_level": "ERROR"}
    if address:
        ray.init(address=address, **options)
    else:
        ray.init(_node_ip_address="127.0.0.1", **options)


def _remote_run(job: Job, task: Task) -> Outcome:
    return job.run(task)


def run_on_ray(todo: list[tuple[int, Task]], job: Job, *, concurrency: int, on_outcome: Any,
               stop: threading.Event, address: str | None = None) -> int:
    """Run ``todo`` on Ray; returns how many finished. Worker failures (a worker process lost)
    come back as failed outcomes of their tasks, never as a crash of the batch."""
    if not todo:
        return 0
    ray = _ray()
    shipped = job.shippable()
    _connect(ray, shipped, address)
    remote = ray.remote(num_cpus=1, max_retries=0)(_remote_run)
    job_ref = ray.put(shipped)
    pending = iter(todo)
    running: dict[Any, tuple[int, Task]] = {}
    done = 0
    while True:
        while len(running) < concurrency and not stop.is_set():
            item = next(pending, None)
            if item is None:
                break
            running[remote.remote(job_ref, item[1])] = item
        if not running:
            break
        ready, _ = ray.wait(list(running), num_returns=1, timeout=0.2)
        for ref in ready:
            index, task = running.pop(ref)
            try:
                outcome = ray.get(ref)
            except Exception as exc:  # the worker died or could not run the task
                outcome = _failed(task, exc)
            on_outcome(index, outcome)
            done += 1
    return done


def _failed(task: Task, exc: BaseException) -> Outcome:
    from atc.solving import Solution
    from sandbox.api import ErrorInfo, ExecutionResult

    message = f"the Ray worker failed: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    if task.query is not None:
        return Outcome(task, Solution.failed(task.query, RuntimeError(message)))
    return Outcome(task, ExecutionResult(ok=False, answer="", sandbox="", duration_ms=0.0,
                                         error=ErrorInfo("SandboxError", message)))
