"""The gateway's transport for Python functions of the host (``protocols.functions``): a
validated call -> the function, run on the host under the run's deadline -> a JSON ``Reply``
(``transport``), its result made JSON data within the run's bounds (``results``)."""
