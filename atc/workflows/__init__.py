"""Data workflows: many tasks at once (``atc batch``, ``solve_many``), resumable result files,
record and replay of tool and model answers, Ray for scale-out, and OpenTelemetry tracing.

Modules: ``tasks`` (the input lines), ``outfile`` (the resumable result file), ``jobs`` (how one
task runs), ``batch`` (the loop: executors, progress, Ctrl-C, the summary), ``ray_executor``,
``tape`` and ``replay`` (record/replay), ``tracing``. Nothing is imported here: ``atc.solving``
uses ``tracing`` on every solve and must stay cheap to import.
"""
