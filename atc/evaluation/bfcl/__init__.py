"""BFCL's multi-turn suite offline: ``atc eval bfcl-multi-turn-base`` (and ``-miss-func``,
``-miss-param``, ``-long-context``).

The Berkeley Function Calling Leaderboard ships its multi-turn data, its stateful Python API
classes (a file system, trading, travel booking, messaging, vehicle control...) and its
state-based checker inside the PyPI package ``bfcl-eval``; nothing else of that package (model
clients, GPU libraries) is needed: ``pip install --no-deps bfcl-eval`` plus ``mpmath`` (the
``bfcl`` extra). Modules:

- ``data``: the installed package's data, read without importing it (tasks, ground truth,
  function docs), and BFCL's function docs as JSON Schema;
- ``state``: a task's API class instances, loaded with its initial state, as function tools
  (``protocols.functions``) that hold that state from one turn to the next, and the tap that
  records every call that reached them;
- ``checker``: the calls made, turn by turn, as BFCL's call strings, scored by BFCL's own
  ``multi_turn_checker`` (so the number is BFCL's);
- ``job``: one task = one run of the strategy per user turn (the batch job of ``atc eval``);
- ``reader``: the suites, registered as ``atc eval`` readers.
"""
