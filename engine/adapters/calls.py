"""A framework's tool calls on the harness's one call path: what every adapter shares.

An adapter knows its framework's hook; this knows the rest, once: which tools are guarded and
under which key (`<backend>@<credential>`, never the tool name alone), their settings, and how
one call runs. Two shapes of hook exist:

- **A wrapping hook** (PydanticAI, the OpenAI Agents SDK, LangChain) hands over the tool's own
  run: `call` (or `call_sync`) runs it as a function tool's attempt through `Harness.call_tool`
  (`Harness.guard` for a plain function), with the retry budget when the tool is idempotent.
- **A pair of hooks** around a run the framework makes itself (Claude's `PreToolUse` and
  `PostToolUse`, ADK's before and after callbacks): `begin` starts the same `call_tool` in a
  task whose first attempt waits for `end` to report the outcome, so admission, the probe,
  completion and the answer are still `CallPath._run`'s; where the hook can run the tool
  again (ADK's callbacks get the tool and its arguments), `end` says how, and a tool named
  idempotent is retried as everywhere else. A call never reported back (the host
  denied it after us, an interrupt) is completed neutral at its lease: the probe slot freed,
  nothing counted.

The answer is the structured result (`engine.results`): `ok` carries the tool's own value as
`data`, which the adapter hands back to its framework untouched; anything else is what the model
reads, as compact JSON (`result_json`) in the framework's failure form.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import time
import warnings
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from breakerdeck.engine.core.classify import (
    Attempt,
    Classifier,
    default_classifier,
    own_error,
    text_verdict,
)
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.harness import Harness, RetryBudget, Tool
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.policy import ToolPolicy
from breakerdeck.engine.results import ToolResult

#: Tool name to backend, or a callable of the tool name (None: not guarded).
Backends = Mapping[str, str] | Callable[[str], str | None]
#: A credential id; or a callable of the tool name, or of the call (tool name, arguments, the
#: framework's context), so one tool can serve several tenants.
Credential = str | Callable[..., str]


class AdapterError(ValueError):
    """A setting the adapter cannot use (`backends` or `credential` raised, a wrong engine)."""


class ReportedFailure(Exception):
    """A failure the framework hands over as text only (Claude's `PostToolUseFailure`, a
    LangChain error `ToolMessage`): read by `classify.text_verdict`; text in which it finds
    nothing of the policy's is the tool's own failure, recorded uncounted and raised again.
    `value`: what the framework returned with it."""

    def __init__(self, text: str, value: Any = None) -> None:
        super().__init__(text)
        self.text = text
        self.value = value


class AdapterCalls:
    """One adapter's settings and its calls. `arguments`: the framework's own exceptions for
    wrong arguments (caller errors, never counted). `reruns`: whether the hook can run the tool
    again (a wrapping hook, or ADK's pair, whose callbacks get the tool and its arguments);
    Claude's pair cannot, so every call there is one attempt."""

    def __init__(
        self,
        engine: Engine,
        backends: Backends,
        *,
        framework: str,
        credential: Credential = "default",
        agent: str | None = None,
        idempotent: Iterable[str] = (),
        alternatives: Mapping[str, Iterable[str]] | None = None,
        schemas: Mapping[str, type[BaseModel]] | None = None,
        classifier: Classifier | None = None,
        deadline_seconds: float = 30.0,
        attempts: int = 2,
        backoff_seconds: float = 1.0,
        probe_wait_seconds: float = 0.0,
        arguments: tuple[type[BaseException], ...] = (),
        reruns: bool = True,
    ) -> None:
        if not isinstance(engine.policy, ToolPolicy):
            raise AdapterError(
                f"{framework}: the adapters run the tool policy; this engine runs "
                f"{type(engine.policy).__name__} (make it with Engine(ToolPolicy(), ...))"
            )
        self.engine = engine
        self.framework = framework
        self.agent = agent
        self._backends = backends
        self._credential = credential
        self._credential_takes_call = callable(credential) and _takes_call(credential)
        self.idempotent = frozenset(idempotent)
        self._reruns = reruns
        self._alternatives = {name: tuple(names) for name, names in (alternatives or {}).items()}
        self._schemas = dict(schemas or {})
        self._settings = Tool(
            "settings",
            backend="settings",
            deadline_seconds=deadline_seconds,
            attempts=attempts,
            backoff_seconds=backoff_seconds,
            probe_wait_seconds=probe_wait_seconds,
            classifier=classifier or default_classifier,
        )  # checked here, at construction, not at the first call
        self._tools: dict[str, Tool | None] = {}
        #: Tools seen that have no backend: not guarded (warned about once each).
        self.unguarded: list[str] = []
        self._harness = _AdapterHarness(engine, arguments)
        self._pending: dict[str, _Pending] = {}

    # -- which tools, under which settings ------------------------------------------------

    def check_names(self, names: Iterable[str]) -> None:
        """Given the framework's tool list: warn of `backends` entries naming no tool, and of
        tools with no backend (listed in `unguarded`)."""
        known = set(names)
        if isinstance(self._backends, Mapping):
            strangers = sorted(set(self._backends) - known)
            if strangers:
                warnings.warn(
                    f"{self.framework}: backends names tools the agent does not have: "
                    f"{', '.join(strangers)}",
                    stacklevel=3,
                )
        for name in sorted(known):
            if name not in self._tools and self._backend(name) is None:
                self._unguarded(name)

    def tool(
        self, name: str, *, hinted: bool = False, deadline: float | None = None
    ) -> Tool | None:
        """The harness tool for a framework's tool `name` (made at its first call), or None
        when it has no backend (not guarded). `hinted`: its MCP annotations say a resend is
        safe (`idempotentHint`, `readOnlyHint`); `deadline`: the framework's own timeout for
        it, when shorter than `deadline_seconds`."""
        if name in self._tools:
            return self._tools[name]
        backend = self._backend(name)
        if backend is None:
            self._unguarded(name)
            tool = None
        else:
            tool = self._register(name, backend, hinted, deadline)
        self._tools[name] = tool
        return tool

    def _unguarded(self, name: str) -> None:
        if name not in self.unguarded:
            self.unguarded.append(name)
            warnings.warn(
                f"{self.framework}: tool {name!r} has no backend in `backends`: not guarded",
                stacklevel=4,
            )

    def _register(self, name: str, backend: str, hinted: bool, deadline: float | None) -> Tool:
        settings = self._settings
        retried = self._reruns and (hinted or name in self.idempotent)
        seconds = settings.deadline_seconds
        if deadline is not None and 0 < deadline < seconds:
            seconds = deadline
        tool = Tool(
            name,
            backend=backend,
            function=_run,
            classifier=settings.classifier,
            response_schema=self._schemas.get(name),
            alternatives=self._alternatives.get(name, ()),
            deadline_seconds=seconds,
            attempts=settings.attempts if retried else 1,
            backoff_seconds=settings.backoff_seconds,
            probe_wait_seconds=min(settings.probe_wait_seconds, seconds),
            idempotent=retried,
        )
        return self._harness.register(tool)

    def _backend(self, name: str) -> str | None:
        backends = self._backends
        if isinstance(backends, Mapping):
            return backends.get(name)
        try:
            return backends(name)
        except Exception as error:
            raise AdapterError(
                f"{self.framework}: backends({name!r}) raised {type(error).__name__}: {error}; "
                "the call was not made"
            ) from error

    def credential_for(self, name: str, arguments: Any = None, context: Any = None) -> str:
        credential = self._credential
        if isinstance(credential, str):
            return credential
        try:
            if self._credential_takes_call:
                return credential(name, arguments, context)
            return credential(name)
        except Exception as error:
            raise AdapterError(
                f"{self.framework}: credential for tool {name!r} raised "
                f"{type(error).__name__}: {error}; the call was not made"
            ) from error

    def agent_name(self, framework_agent: str | None) -> str:
        return self.agent or framework_agent or "agent"

    # -- a wrapping hook ------------------------------------------------------------------

    async def call(
        self, tool: Tool, run: Callable[[], Awaitable[Any]], *, agent: str, credential: str
    ) -> ToolResult:
        """Run the framework's own run of the tool (`run`, called once per attempt) through the
        call path. A tool's own error is raised again, the call recorded uncounted."""
        return await self._harness.call_tool(agent, tool.name, run, credential=credential)

    def call_sync(
        self, tool: Tool, run: Callable[[], Any], *, agent: str, credential: str
    ) -> ToolResult:
        """`call` for a framework that runs the tool without an event loop (retries wait with
        `time.sleep`, as `Harness.guard` does)."""
        guarded = self._harness.guard(tool, sleep=time.sleep)(run)
        result: ToolResult = guarded(agent=agent, credential=credential)
        return result

    # -- a pair of hooks ------------------------------------------------------------------

    async def begin(
        self, tool: Tool, call_id: str | None, *, agent: str, credential: str
    ) -> ToolResult | None:
        """Before the framework runs the tool: None when the call may go (its outcome is owed
        to `end` under `call_id`), else the refusal the model gets instead. A call with no id
        cannot be matched to its outcome: it goes unguarded, said, and nothing is recorded."""
        if call_id is None:
            warnings.warn(
                f"{self.framework}: a call of {tool.name!r} came with no call id, so its "
                "outcome could not be matched: it ran unguarded",
                stacklevel=3,
            )
            return None
        if call_id in self._pending:
            raise AdapterError(f"{self.framework}: tool call {call_id!r} began twice")
        reported = _Reported(tool.lease)
        task = asyncio.ensure_future(
            self._harness.call_tool(agent, tool.name, reported, credential=credential)
        )
        await asyncio.wait((task, reported.admitted), return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            return task.result()
        key = self.engine.key_for(agent, tool.backend, credential)
        pending = _Pending(tool, key, reported, task)
        self._pending[call_id] = pending
        task.add_done_callback(functools.partial(self._forget, call_id, pending))
        return None

    def owes(self, call_id: str | None) -> bool:
        return call_id in self._pending

    async def end(
        self,
        call_id: str | None,
        *,
        value: Any = None,
        error: Exception | None = None,
        attempt: Attempt | None = None,
        rerun: Callable[[], Awaitable[Any]] | None = None,
    ) -> ToolResult | None:
        """The framework ran the call `begin` let go: record what it returned (`value`) or
        raised (`error`), classified, or an `attempt` made by the adapter (`neutral`), and
        answer. `rerun`: how the hook runs the tool again (ADK hands its callbacks the tool and
        its arguments), for the retries of a tool named idempotent, each after the breaker's
        re-check. A tool's own error is raised again. None for a call id not begun here,
        already reported or past its lease (warned: nothing recorded)."""
        if call_id is None:
            return None  # `begin` let it go unguarded, and said so
        pending = self._pending.pop(call_id, None)
        if pending is None:
            warnings.warn(
                f"{self.framework}: no call {call_id!r} is waiting for its outcome "
                "(never begun here, already reported, or past its lease): nothing recorded",
                stacklevel=3,
            )
            return None
        if attempt is None:
            attempt = self._harness.classify_for(pending.tool, pending.key, value, error)
        pending.reported.report(attempt, rerun)
        return await pending.task

    async def abandon(self, call_id: str | None) -> None:
        """The framework's run of a call `begin` let go was abandoned (cancelled, interrupted):
        its call is cancelled too, and ended before this returns, so the call path has
        completed it neutral (`Engine.abandon`) rather than at its lease."""
        pending = self._pending.pop(call_id, None) if call_id is not None else None
        if pending is not None:
            pending.task.cancel()
            await asyncio.wait((pending.task,))

    def _forget(self, call_id: str, pending: _Pending, _: object) -> None:
        if self._pending.get(call_id) is pending:
            del self._pending[call_id]


def neutral(detail: str) -> Attempt:
    """A call that ended without an outcome of the backend's (never reported back):
    uncounted."""
    return Attempt(Outcome(OutcomeClass.CALLER_ERROR, detail=detail), "cancelled")


def result_json(result: ToolResult) -> str:
    """What the model reads: the structured result as compact JSON (anything the result holds
    that JSON cannot carry is written as its text)."""
    return json.dumps(result, ensure_ascii=False, separators=(",", ":"), default=str)


async def _run(run: Callable[[], Awaitable[Any]]) -> Any:
    """A wrapped tool's one attempt: the framework's own run of it, again per attempt."""
    return await run()


def _takes_call(credential: Callable[..., str]) -> bool:
    """Whether a credential callable takes the call (3 arguments) rather than the tool name."""
    try:
        parameters = inspect.signature(credential).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 3 or any(p.kind is p.VAR_POSITIONAL for p in parameters)


@dataclass(frozen=True, slots=True)
class _Pending:
    """A call `begin` let go, owed its outcome: its tool and key, its attempt, its run."""

    tool: Tool
    key: str
    reported: _Reported
    task: asyncio.Task[ToolResult]


class _Reported:
    """The first attempt of a call a pair of hooks brackets: admitted when the attempt starts,
    its outcome whatever `end` reports, or neutral at the lease if nothing is; the retries, if
    any, run the tool as `end` says it can be run again (`rerun`)."""

    def __init__(self, lease: float) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        #: Counted from before the call is admitted, so the neutral ending always comes before
        #: the engine's own expiry of the probe (admission, lease and grace).
        self._due = loop.time() + lease
        self.admitted: asyncio.Future[None] = loop.create_future()
        self._outcome: asyncio.Future[Attempt] = loop.create_future()
        self.rerun: Callable[[], Awaitable[Any]] | None = None

    async def attempt(self) -> Attempt:
        self.admitted.set_result(None)
        try:
            return await asyncio.wait_for(self._outcome, max(self._due - self._loop.time(), 0))
        except TimeoutError:
            return neutral("the framework never reported the call's outcome")

    def report(self, attempt: Attempt, rerun: Callable[[], Awaitable[Any]] | None) -> None:
        if not self._outcome.done():
            self.rerun = rerun
            self._outcome.set_result(attempt)


class _AdapterHarness(Harness):
    """The harness the adapters run on: a function tool's attempt is the framework's run, or
    (for a pair of hooks) the outcome the second hook reports."""

    def __init__(self, engine: Engine, arguments: tuple[type[BaseException], ...]) -> None:
        super().__init__(engine)
        self.argument_errors = arguments

    async def _attempt(self, budget: RetryBudget) -> Attempt:
        reported = budget.args
        if isinstance(reported, _Reported):
            budget.call.attempts += 1
            attempt = await reported.attempt()
            # A retry, if the budget wants one, is the tool's run again as the hook can make it
            # (a function tool's attempt: under its deadline, classified alike).
            budget.args = reported.rerun  # None only where the tool has one attempt
            return attempt
        return await super()._attempt(budget)

    def classify_for(self, tool: Tool, key: str, value: Any, error: Exception | None) -> Attempt:
        return self._classified(tool, key, value, error)

    def _classified(self, tool: Tool, key: str, value: Any, error: Exception | None) -> Attempt:
        if isinstance(error, ReportedFailure) and tool.classifier is default_classifier:
            verdict = text_verdict(
                error.text,
                deadline=tool.deadline_seconds,
                credential_worked=functools.partial(self.engine.credential_worked, key),
            )
            if verdict is None:  # nothing of the policy's: the tool's own failure
                return Attempt(own_error(error), "error", raised=error)
            return Attempt(verdict.outcome, "error", None, None, verdict.retry, verdict.wait)
        return super()._classified(tool, key, value, error)


def hinted(annotations: Any) -> bool:
    """Whether MCP tool annotations (a mapping or an object, as the framework carries them)
    say a resend is safe: `idempotentHint` or `readOnlyHint`."""
    if annotations is None:
        return False
    if isinstance(annotations, Mapping):
        return bool(annotations.get("idempotentHint") or annotations.get("readOnlyHint"))
    return bool(
        getattr(annotations, "idempotentHint", None) or getattr(annotations, "readOnlyHint", None)
    )
