"""Run atc's command line, or one of its modules, from a given source tree.

``python tree_run.py TREE cli ARGS...`` is ``atc ARGS...``, and ``python tree_run.py TREE module
NAME ARGS...`` is ``python -m NAME ARGS...``, with ``atc`` (and ``protocols``...) imported from
``TREE`` (a checkout of another commit: ``git archive COMMIT atc protocols sandbox probes | tar
-x -C TREE``) instead of the editable install's. retrieval_speed.py runs the code before and
after a change this way, in the same interpreter with the same packages, in the same run.
"""

from __future__ import annotations

import runpy
import sys


def main() -> int:
    tree, kind, *rest = sys.argv[1:]
    sys.meta_path[:] = [f for f in sys.meta_path if not type(f).__name__.startswith("_Editable")]
    sys.path.insert(0, tree)
    if kind == "cli":
        sys.argv = ["atc", *rest]
        from atc.cli import entry

        entry()
        return 0
    sys.argv = [rest[0], *rest[1:]]
    runpy.run_module(rest[0], run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
