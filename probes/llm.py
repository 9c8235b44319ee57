"""Instance discovery with a model (the paper's method), on the same chain of probing.

For a tool, the model makes up a question the tool answers and writes a program that answers it
(``probes/prompts/``); the program runs in the sandbox through the gateway like any ``atc run``,
with only the tool and its helpers in scope; a sample counts when the tool itself returned a 2xx
with a body. Up to N samples per tool and round, each a turn of one conversation, so a failed
program comes back to the model with its error and the calls it made (the paper resamples
blindly). The question and program that worked become the tool's usage example.

Round 0 probes each tool alone. In later rounds (up to beta) the model picks helpers from H, the
tools already documented, for each tool still in B: the list it chooses from is ranked by the
same name/type/value matching the model-free prober uses, and a reply that names no valid tool
falls back to that ranking. Helpers are shown with the response schemas learnt for them, and
values seen in earlier responses are offered for the tool's parameters.

Every call a program makes is recorded like a probe request (budget, cache, harvest); arguments
are traced back to the earlier response that held their value, which gives ``depends_on`` and
the parameter -> field mapping in model mode too. A model that answers garbage, writes wrong
programs or is unreachable never stops the probe: the tool is simply not documented by the
model (and the model-free prober gets its chance afterwards).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Sequence
from dataclasses import replace
from functools import cache
from importlib import resources
from typing import Any

from atc.errors import ModelError
from atc.llm.chat import Message, ModelClient
from atc.loop.checks import check_program
from atc.loop.extract import extract_program
from probes.arguments.harvest import field_path
from probes.arguments.naming import norm
from probes.auth import REFUSED
from probes.cache import cacheable
from probes.calls import Observation, Source, classify_body
from probes.results.findings import remember, replay
from probes.results.schemas import combine
from probes.state import ProbeState, ToolState
from protocols.model import Collection, Tool
from protocols.render import render_compact, render_full
from sandbox.api import Backend, ExecutionResult, Limits, ToolCall, Toolset
from sandbox.execute import run

__all__ = ["ModelProber", "render_prompt", "parse_reply", "trace_args"]

_PLACEHOLDER = re.compile(r"\{\{\s*([a-z_][a-z0-9_]*)\s*\}\}")
_QUESTION = re.compile(r"^\W*question\W*[:\-]\s*(.+)$", re.IGNORECASE | re.MULTILINE)
#: Helpers offered to the model when it picks them.
MAX_OFFERED = 12


@cache
def _template(name: str) -> str:
    return resources.files("probes").joinpath(f"prompts/{name}.md").read_text(encoding="utf-8")


def render_prompt(prompt: str, /, **values: str) -> str:
    """Template ``probes/prompts/<prompt>.md`` with its ``{{key}}`` placeholders filled (all, exactly)."""
    template = _template(prompt)
    wanted = set(_PLACEHOLDER.findall(template))
    if wanted != set(values):
        raise ValueError(f"prompt {prompt!r}: missing {sorted(wanted - set(values))}, unknown {sorted(set(values) - wanted)}")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template).strip() + "\n"


def parse_reply(text: str, tools: Sequence[str]) -> tuple[str | None, str | None]:
    """(question, program) of a model reply; either may be None."""
    program = extract_program(text or "", tools)
    found = _QUESTION.search(text or "")
    question = " ".join(found.group(1).split())[:300] if found else None
    return question, program


def trace_args(call: ToolCall, earlier: Sequence[Observation]) -> dict[str, Source]:
    """Where each argument of a model-written call came from: the first earlier successful
    response of the same program that holds the value (else the model itself)."""
    out: dict[str, Source] = {}
    for arg, value in call.args.items():
        out[arg] = {"kind": "model"}
        if isinstance(value, bool) or not isinstance(value, str | int) or value in ("", 0):
            continue
        for obs in earlier:
            path = _find(obs.data, value, norm(arg))
            if path is not None:
                out[arg] = {"kind": "harvest", "obs": obs.id, "path": list(path), "tool": obs.tool,
                            "field": field_path(path)}
                break
    return out


def _find(data: Any, value: Any, wanted: str, budget: int = 3000) -> tuple[str | int, ...] | None:
    """The path of ``value`` in ``data`` (a field named like the argument first, then any)."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(data, ())]
    fallback: tuple[str | int, ...] | None = None
    while stack and budget > 0:
        node, path = stack.pop(0)
        budget -= 1
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, item in items:
            here = (*path, key)
            if isinstance(item, dict | list):
                stack.append((item, here))
            elif item == value and type(item) is type(value) or (isinstance(item, int) and str(item) == value):
                if isinstance(key, str) and norm(key) in (wanted, wanted.rsplit("_", 1)[-1]):
                    return here
                fallback = fallback or here
    return fallback


class ModelProber:
    """The model's rounds of the chain of probing over a ``ProbeState``."""

    def __init__(self, probe_state: ProbeState, client: ModelClient, toolset: Toolset, *, sandbox: Backend,
                 limits: Limits) -> None:
        self.s = probe_state
        self.client = client
        self.toolset = toolset
        self.sandbox = sandbox
        self.limits = limits
        self.usage = {"llm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        self.model_error: str | None = None
        self.sandbox_name: str | None = None

    # -- rounds ---------------------------------------------------------------------------------

    def run(self) -> int:
        """Round 0 alone, then rounds with helpers; returns the rounds used (stops on a model error)."""
        s = self.s
        used = 0
        for round_ in range(s.settings.rounds):
            pending = s.pending()
            if not pending or s.stopped or self.model_error:
                break
            used = round_ + 1
            progressed = False
            for state in pending:
                if s.stopped or self.model_error:
                    break
                if replay(s, state, round_):
                    progressed = True
                    continue
                helpers = [] if round_ == 0 else self.select_helpers(state)
                if round_ > 0 and not helpers:
                    continue
                if self.discover(state, helpers, round_):
                    progressed = True
            if not progressed and round_ > 0:
                break
        return used

    def _count(self, completion: Any) -> None:
        self.usage["llm_calls"] += completion.requests
        self.usage["prompt_tokens"] += completion.prompt_tokens
        self.usage["completion_tokens"] += completion.completion_tokens

    def _complete(self, messages: list[Message]) -> str | None:
        try:
            completion = self.client.complete(messages)
        except ModelError as exc:
            self.model_error = exc.message
            return None
        self._count(completion)
        return completion.text

    # -- helpers ------------------------------------------------------------------------------------

    def ranked_helpers(self, state: ToolState) -> list[str]:
        """Documented tools whose responses hold values that fit this tool's required parameters,
        best first (the model-free choice, and the order the model is offered them in)."""
        s = self.s
        scores: dict[str, float] = {}
        for pname in state.required():
            for cand in s.harvest.candidates(state.tool, pname, s.planner.role(state.tool, pname)):
                if cand.seen is not None and cand.seen.tool != state.name:
                    scores[cand.seen.tool] = max(scores.get(cand.seen.tool, 0.0), cand.score)
        documented = [x.name for x in s.states.values() if x.status == "documented" and x.name != state.name]
        return sorted(documented, key=lambda n: (-scores.get(n, 0.0), documented.index(n)))

    def select_helpers(self, state: ToolState) -> list[str]:
        """The model's pick of helpers from H (falls back to the ranking when its reply names none)."""
        ranked = self.ranked_helpers(state)[:MAX_OFFERED]
        if not ranked:
            return []
        offered = [self._learnt(self.s.states[n]) for n in ranked]
        prompt = render_prompt("probe_select", name=state.name, tool=render_full(state.tool).strip(),
                               failure=state.reason or "no successful call yet",
                               candidates=render_compact(offered, param_notes=False).strip())
        text = self._complete([{"role": "user", "content": prompt}])
        picked = _names_in(text or "", ranked)
        return self._with_chains(picked[:3] or ranked[:2])

    def _with_chains(self, helpers: list[str], limit: int = 6) -> list[str]:
        """The helpers and, before them, the tools their own inputs came from (recursively): a
        program can only chain tools it has in scope."""
        out: list[str] = []

        def add(name: str, depth: int) -> None:
            state = self.s.states.get(name)
            if name in out or state is None or depth > 5:
                return
            for upstream in state.depends_on:
                add(upstream, depth + 1)
            if len(out) < limit:
                out.append(name)

        for helper in helpers:
            add(helper, 0)
        return out

    def _learnt(self, state: ToolState) -> Tool:
        tool = copy.copy(state.tool)
        tool.response_schema = combine(tool.response_schema, state.schema())[0]
        return tool

    # -- one tool -------------------------------------------------------------------------------

    def _scope(self, names: list[str]) -> Toolset:
        """A toolset holding only ``names`` (the tool and its helpers), reached as the full one is."""
        groups: dict[str, list[Tool]] = {}
        for name in names:
            owner = self.toolset.collection_of(name)
            groups.setdefault(owner.name, []).append(self.toolset.tools[name])
        collections = []
        for cname, tools in groups.items():
            owner = next(c for c in self.toolset.collections if c.name == cname)
            collections.append(Collection(name=cname, tools=tools, description=owner.description,
                                          source=owner.source, source_format=owner.source_format,
                                          servers=owner.servers, security_schemes=owner.security_schemes,
                                          version=owner.version))
        return replace(self.toolset, collections=collections)

    def _values(self, state: ToolState) -> str:
        lines = []
        for pname in state.required():
            cands = [c for c in self.s.harvest.candidates(state.tool, pname, self.s.planner.role(state.tool, pname))
                     if c.seen is not None][:3]
            if cands:
                shown = ", ".join(json.dumps(c.value, ensure_ascii=False) for c in cands)
                first = cands[0].seen
                assert first is not None
                lines.append(f"- {pname}: {shown} (e.g. {first.field} of {first.tool})")
        return "\n".join(lines) or "(none yet)"

    def discover(self, state: ToolState, helpers: list[str], round_: int) -> bool:
        """Up to N samples (question + program) for ``state``'s tool; True when one worked."""
        s = self.s
        scope = self._scope([state.name, *helpers])
        helper_text = render_compact([self._learnt(s.states[h]) for h in helpers]).strip() if helpers else "(none)"
        messages: list[Message] = [
            {"role": "system", "content": render_prompt("probe_system")},
            {"role": "user", "content": render_prompt("probe_discover", tool=render_full(state.tool).strip(),
                                                      helpers=helper_text, values=self._values(state),
                                                      name=state.name)},
        ]
        for _ in range(s.settings.samples):
            left = min(s.caller.budget.left(state.name), s.caller.budget.left())
            if left <= 0 or s.stopped:
                state.reason = state.reason or "its share of the request budget is spent"
                return False
            reply = self._complete(messages)
            if reply is None:
                return False
            question, program = parse_reply(reply, scope.names())
            if program is None:
                error = "the reply held no Python program"
            elif (static := check_program(program, scope.tools)) is not None:
                error = f"{static.get('type')}: {static.get('message')}"
            else:
                result = self._run(program, scope, left)
                own = self._record(state, result, round_)
                if own:
                    state.programs[own[0].id] = {"program": program, "question": question or ""}
                    s.succeed(state, own[0], round_, source="model")
                    for more in own[1:]:
                        state.successes.append(more)
                        s.harvest.add(more, state.tool)
                    remember(s, state, own[0])
                    return True
                error = self._why(state, result)
            state.reason = f"model-written programs failed: {error}"[:300]
            messages.append({"role": "assistant", "content": reply[-4000:] or "(empty reply)"})
            messages.append({"role": "user", "content": render_prompt(
                "probe_retry", error=error, name=state.name, calls=self._calls_text(program, scope))})
        return False

    def _calls_text(self, program: str | None, scope: Toolset) -> str:
        if not program:
            return "Reply with a question line and one ```python block."
        return "The tools in scope:\n" + render_compact(list(scope.tools.values()), param_notes=False).strip()

    def _run(self, program: str, scope: Toolset, left: int) -> ExecutionResult:
        limits = replace(self.limits, max_calls=left)
        result = run(program, scope, limits, sandbox=self.sandbox)
        self.sandbox_name = result.sandbox
        return result

    def _record(self, state: ToolState, result: ExecutionResult, round_: int) -> list[Observation]:
        """Account for every call the program made (budget, cache, harvest); the tool's own
        successful observations, in order."""
        s = self.s
        caller = s.caller
        earlier: list[Observation] = []
        own: list[Observation] = []
        for call in result.calls:
            tool = self.toolset.tools.get(call.tool)
            if tool is None:
                continue
            kind, sent = _kind_of(call)
            if sent:
                caller.budget.charge(state.name)
            obs = Observation(id=len(caller.observations), tool=call.tool, args=dict(call.args), kind=kind,
                              status=call.status, data=call.response if call.ok or call.status else None,
                              error=call.error, duration_ms=call.duration_ms, provenance=trace_args(call, earlier),
                              round=round_, helper_for=state.name if call.tool != state.name else None)
            caller.observations.append(obs)
            if caller.cache is not None and sent and cacheable(obs.kind, obs.status):
                caller.cache.put(caller.cache.key(tool, obs.args, caller.server(tool)), obs.record())
            if call.tool == state.name:
                s.observe(state, obs)
                if obs.ok:
                    own.append(obs)
            else:
                s.auth.answered(tool, obs)
                if obs.ok:
                    s.helper_sample(obs)
            if obs.status in REFUSED and not s.stopped:
                stop = s.auth.refused(tool, obs)
                if stop is not None:
                    s.stop_reason = stop
            if obs.ok:
                earlier.append(obs)
        return own

    def _why(self, state: ToolState, result: ExecutionResult) -> str:
        own = [c for c in result.calls if c.tool == state.name]
        if result.error is not None and (not own or result.error.tool == state.name or not any(c.ok for c in own)):
            line = f" (line {result.error.line})" if result.error.line else ""
            reason = f"{result.error.type}{line}: {result.error.message}"
        elif not own:
            reason = f"the program never called {state.name}"
        else:
            last = own[-1]
            reason = last.error or f"{state.name} answered HTTP {last.status} without data"
        return " ".join(reason.split())[:400]


def _kind_of(call: ToolCall) -> tuple[str, bool]:
    """(``Observation.kind``, whether a request was sent) of a call a program made."""
    error = call.error or ""
    if call.status is not None:
        if call.status >= 400:
            return "http", True
        if call.status >= 300:
            return "redirect", True
        if call.ok:
            return classify_body(call.response), True
        return ("too_large" if "larger than the" in error else "garbage"), True
    if call.ok:  # an MCP tool's answer: no status
        return classify_body(call.response), True
    failure = call.failure or ""
    if failure in ("tool", "protocol"):
        return "tool_error", True  # an isError result or a JSON-RPC error: sent, and answered
    if failure == "timeout" or "no response within" in error:
        return "timeout", True
    if failure in ("connect", "request") or "request failed" in error:
        return "network", True
    if failure == "response":
        return ("too_large" if "larger than the" in error else "garbage"), True
    return "invalid", False  # refused by the gateway before sending (arguments, budget)


def _names_in(text: str, allowed: list[str]) -> list[str]:
    """Tool names a reply picks: a JSON list first, else every allowed name it mentions, in order."""
    picked: list[str] = []
    match = re.search(r"\[[^\[\]]*\]", text)
    if match:
        try:
            data = json.loads(match.group(0))
        except ValueError:
            data = None
        if isinstance(data, list):
            picked = [x for x in data if isinstance(x, str) and x in allowed]
    if not picked:
        picked = sorted({n for n in allowed if re.search(rf"\b{re.escape(n)}\b", text)}, key=text.find)
    return list(dict.fromkeys(picked))
