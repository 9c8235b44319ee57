"""Data workflows: many tasks at once (``atc batch``, ``solve_many``), resumable result files,
record and replay of tool and model answers, and Ray for scale-out.

Modules: ``tasks`` (the input lines), ``outfile`` (the resumable result file), ``jobs`` (how one
task runs), ``batch`` (the loop: executors, progress, Ctrl-C, the summary), ``many``
(``solve_many``), ``ray_executor``, ``tape`` and ``replay`` (record/replay). This room runs
``atc.loop.solving`` and is never imported by it (OpenTelemetry spans, which every solve uses, are
``atc.tracing``). Nothing is imported here.
"""
