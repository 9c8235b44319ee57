"""Data-flow analysis of a program's AST: which tool calls can a failing expression's data come from?

The sandbox reports where a program failed as Python's own positions (line and column span of
the instruction being executed, per program frame). This package maps that span back to the
AST node that failed, picks the operands whose values caused the failure, and follows the
program's data flow backwards until it reaches calls of tools:

- names to the assignments that reach the use in the same scope (plain, tuple unpacking,
  augmented, walrus, ``with ... as``, ``for`` targets, comprehension targets), then outward to
  enclosing scopes and globals;
- function parameters to the argument at the call that is really executing (the next-outer
  frame points at it), else to every call site;
- lambda parameters (and functions passed as values) to the other arguments of the call that
  receives them: ``sorted(books, key=lambda b: b['x'])`` -> ``books``;
- results of the program's own functions to their ``return`` values;
- subscripts, attributes, method calls, operators, f-strings, containers and comprehensions to
  the values they are computed from; container mutations (``xs.append(v)``, ``d[k] = v``) to
  what was put in; an ``except ... as e`` name to the tool calls of its ``try`` block.

Each source found is a ``Source``: the tool, its call node, the number of hops (name bindings,
parameters and returns crossed) and a readable path. It is a static over-approximation guided
by the run (the frames), deliberately simple: it never executes anything and stops after a
bounded amount of work. Ranking the sources is ``sandbox.attribution.fault``'s job.

``scopes`` holds the static index (parents, scopes, bindings); ``trace`` the tracer.
"""

from sandbox.attribution.dataflow.scopes import Binding, FramePoint, ProgramIndex, Source
from sandbox.attribution.dataflow.trace import Tracer

__all__ = ["Binding", "FramePoint", "ProgramIndex", "Source", "Tracer"]
