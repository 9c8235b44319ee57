"""Run a function over many items, at most ``concurrency`` at a time, here or on Ray.

``run_each(fn, items, ...)`` calls ``fn(item)`` for every item -- in threads of this process
(``local``) or as Ray tasks (``ray``: ``fn`` and the items are pickled to the workers, so ``fn``
must be a module-level function) -- and hands each result to ``on_result(index, result)`` as it
arrives. Setting ``stop`` starts no new item. It returns how many finished. A Ray task that
raises is handed over as the exception (``on_error``), never sinking the others. The batch runner
(``atc.workflows.batch``) and ``probes.many`` use it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

from atc.errors import ConfigError, UsageError

__all__ = ["run_each", "EXECUTORS", "RAY_INSTALL", "ray_module", "connect_ray"]

EXECUTORS = ("local", "ray")
RAY_INSTALL = "pip install 'atc[ray]'  (the ray package)"

T = TypeVar("T")
R = TypeVar("R")


def ray_module() -> Any:
    """``ray``, imported now (it takes a second or more); ``ConfigError`` with the install command."""
    try:
        # ray: optional (atc[ray]), seconds to import; only --executor ray needs it
        import ray
    except ImportError as exc:
        raise ConfigError("--executor ray needs Ray, which is not installed", hint=RAY_INSTALL) from exc
    return ray


def connect_ray(address: str | None, env: dict[str, str]) -> Any:
    """Join ``address`` (``RAY_ADDRESS``), else start a cluster on this machine bound to 127.0.0.1;
    ``env`` goes to the workers in the job's runtime environment. A caller that started or joined
    a cluster already keeps it (and its runtime environment)."""
    ray = ray_module()
    if not ray.is_initialized():
        options: dict[str, Any] = {"runtime_env": {"env_vars": env}, "include_dashboard": False,
                                   "log_to_driver": False, "logging_level": "ERROR"}
        if address:
            ray.init(address=address, **options)
        else:
            ray.init(_node_ip_address="127.0.0.1", **options)
    return ray


def run_each(fn: Callable[..., R], items: Sequence[T], *, on_result: Callable[[int, R], None],
             on_error: Callable[[int, BaseException], None] | None = None, executor: str = "local",
             concurrency: int = 4, stop: threading.Event | None = None, address: str | None = None,
             env: dict[str, str] | None = None, indexes: Sequence[int] | None = None,
             shared: Any = None) -> int:
    """See the module docstring. ``indexes`` are what ``on_result`` is told (default 0, 1, ...).
    ``shared``: when given, ``fn(shared, item)`` is called instead, and on Ray ``shared`` is put in
    the object store once rather than pickled with every item."""
    if concurrency < 1:
        raise UsageError("concurrency must be at least 1")
    if executor not in EXECUTORS:
        raise UsageError(f"unknown executor {executor!r}", hint="use local or ray")
    if not items:
        return 0
    stop = stop or threading.Event()
    where = list(indexes) if indexes is not None else list(range(len(items)))

    def failed(index: int, exc: BaseException) -> None:
        if on_error is None:
            raise exc
        on_error(index, exc)

    if executor == "ray":
        return _on_ray(fn, items, where, on_result, failed, concurrency, stop, address, env or {}, shared)
    call: Callable[[T], R] = fn if shared is None else (lambda item: fn(shared, item))
    pending: Iterator[tuple[int, T]] = iter(zip(where, items, strict=True))
    running: dict[Future[R], int] = {}
    done = 0
    with ThreadPoolExecutor(max_workers=min(concurrency, len(items)), thread_name_prefix="atc-each") as pool:
        while True:
            while len(running) < concurrency and not stop.is_set():
                item = next(pending, None)
                if item is None:
                    break
                running[pool.submit(call, item[1])] = item[0]
            if not running:
                break
            # wake every 0.2 s to notice ``stop`` even while every item is busy
            finished, _ = wait(list(running), timeout=0.2, return_when=FIRST_COMPLETED)
            for future in finished:
                index = running.pop(future)
                try:
                    result = future.result()
                except Exception as exc:
                    failed(index, exc)
                else:
                    on_result(index, result)
                done += 1
    return done


def _on_ray(fn: Callable[..., R], items: Sequence[T], where: list[int], on_result: Callable[[int, R], None],
            failed: Callable[[int, BaseException], None], concurrency: int, stop: threading.Event,
            address: str | None, env: dict[str, str], shared: Any) -> int:
    ray = connect_ray(address, env)
    remote = ray.remote(num_cpus=1, max_retries=0)(fn)
    head = () if shared is None else (ray.put(shared),)
    pending = iter(zip(where, items, strict=True))
    running: dict[Any, int] = {}
    done = 0
    while True:
        while len(running) < concurrency and not stop.is_set():
            item = next(pending, None)
            if item is None:
                break
            running[remote.remote(*head, item[1])] = item[0]
        if not running:
            break
        ready, _ = ray.wait(list(running), num_returns=1, timeout=0.2)
        for ref in ready:
            index = running.pop(ref)
            try:
                result = ray.get(ref)
            except Exception as exc:  # the task raised, or its worker died
                failed(index, exc)
            else:
                on_result(index, result)
            done += 1
    return done
