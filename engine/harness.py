"""The agent harness (`tool` policy): registered tools, each call wrapped by its breaker.

The breaker wraps the whole retry budget: one exhausted budget is one counted failure, and the
breaker is asked again before every retry. Every answer is a structured result the model can
act on (`engine.results`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import json
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic import BaseModel, ValidationError

from breakerdeck.engine import results
from breakerdeck.engine.calls.callpath import CallPath, Completion, Retries
from breakerdeck.engine.calls.deadline import Deadlines
from breakerdeck.engine.core.breaker import Admission
from breakerdeck.engine.core.classify import (
    PLAIN_SUCCESS,
    Attempt,
    Classifier,
    deadline_attempt,
    default_classifier,
    function_attempt,
    network_fault,
    own_error,
    tool_error_attempt,
    tool_response_attempt,
)
from breakerdeck.engine.engine import Call, Engine
from breakerdeck.engine.outcomes import SUCCESS, Outcome, OutcomeClass
from breakerdeck.engine.parts import modes
from breakerdeck.engine.results import ToolResult


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a call is stopped before it reaches the breaker (permission, approval, pre-call)."""

    cls: OutcomeClass
    reason: str


#: Decides, before anything is sent, whether this agent may make this call at all.
Authorizer = Callable[[str, "Tool", Any], Refusal | None]

#: A call's JSON body: encoded once, before admission; a `Refusal` when it cannot be.
Body = bytes | Refusal | None


@dataclass(frozen=True)
class Tool:
    """A tool as the harness registers it. Tools with the same backend share a breaker.

    An HTTP tool (no `function`) sends `method` to `path` on its backend's client with the
    call's arguments as the JSON body. A function tool is `function`, an async callable given
    the call's arguments as its one positional argument (`await function(args)`); what it
    returns is the result's data, and what it raises is classified (`classifier`, by default
    the policy's rules for function tools, `classify.function_attempt`).

    `idempotent`: whether a failed attempt may be sent again within `attempts`. An HTTP tool
    is, unless set False (every attempt carries the call's Idempotency-Key, so the backend can
    tell a resend); a function tool is only when set True, since nothing tells its backend
    that a second run is the first one again (an email sent twice). A function wrapped by
    `Harness.guard` is a function tool: retried only when its tool is marked True.
    """

    name: str
    backend: str
    method: str = "POST"
    path: str = "/"
    response_schema: type[BaseModel] | None = None
    args_schema: type[BaseModel] | None = None
    alternatives: tuple[str, ...] = ()
    deadline_seconds: float = 30.0
    attempts: int = 2
    backoff_seconds: float = 1.0
    function: Callable[..., Awaitable[Any]] | None = None
    classifier: Classifier = field(default=default_classifier)
    #: Opt-in (DESIGN): a call that finds the probe out waits this long for its outcome.
    probe_wait_seconds: float = 0.0
    idempotent: bool | None = None
    #: Its key's breaker mode (DESIGN, "Operator control"): `shadow` decides as it would and
    #: refuses nothing, `enforce`; None takes the engine's (`Engine(mode=...)`). The key
    #: (`<backend>@<credential>`) is known only at a call, so each is configured on the engine
    #: when this tool first calls it (`Engine.configure_mode`: an operator's write still wins).
    mode: str | None = None

    def __post_init__(self) -> None:
        if self.mode is not None and self.mode not in modes.MODES:
            raise ValueError(f"tool {self.name!r}: mode must be 'enforce' or 'shadow'")
        if self.attempts < 1:
            raise ValueError(f"tool {self.name!r}: attempts must be at least 1")
        # NaN passes every comparison, and an infinite deadline makes an infinite lease.
        if not (math.isfinite(self.deadline_seconds) and self.deadline_seconds > 0):
            raise ValueError(f"tool {self.name!r}: deadline_seconds must be positive and finite")
        if not (math.isfinite(self.backoff_seconds) and self.backoff_seconds >= 0):
            raise ValueError(f"tool {self.name!r}: backoff_seconds must be 0 or more and finite")
        if not 0 <= self.probe_wait_seconds <= self.deadline_seconds:
            raise ValueError(
                f"tool {self.name!r}: probe_wait_seconds must be from 0 to deadline_seconds"
            )

    @functools.cached_property
    def call_attempts(self) -> int:
        """The attempts `call_tool` makes at most: `attempts` where a resend is safe, else 1."""
        retried = self.function is None if self.idempotent is None else self.idempotent
        return self.attempts if retried else 1

    @functools.cached_property
    def plain(self) -> bool:
        """Whether what the function returns is a success as it is: the policy's classifier
        and no response schema to check it against."""
        return self.classifier is default_classifier and self.response_schema is None

    @functools.cached_property
    def lease(self) -> float:
        """The whole retry budget: what a probe may use before it counts as lost."""
        return self.attempts * self.deadline_seconds + (self.attempts - 1) * self.backoff_seconds


class Harness(CallPath["RetryBudget", Attempt, ToolResult]):
    """The `tool` policy for an agent's tools: `register` each `Tool`, then `call_tool` (or
    wrap a function with `guard`). One harness per engine is the usual shape; `clients` holds
    one httpx client per HTTP tools' backend, and `authorize` may refuse a call before it is
    sent."""

    #: Exceptions a function tool raises for wrong arguments, beyond pydantic's (a framework
    #: adapter names its framework's own): caller errors, never counted.
    argument_errors: tuple[type[BaseException], ...] = ()

    def __init__(
        self,
        engine: Engine,
        clients: Mapping[str, httpx.AsyncClient] | None = None,
        *,
        authorize: Authorizer | None = None,
    ) -> None:
        self.engine = engine
        self.clients = dict(clients or {})
        self.authorize = authorize
        self._tools: dict[str, Tool] = {}
        self._keys = _Keys(engine)

    def register(self, tool: Tool) -> Tool:
        if tool.function is None and tool.backend not in self.clients:
            raise ValueError(f"tool {tool.name!r}: no HTTP client for backend {tool.backend!r}")
        for other in self._tools.values():  # tools of a backend share its breakers
            if (
                other.backend == tool.backend
                and other.mode
                and tool.mode
                and other.mode != tool.mode
            ):
                raise ValueError(
                    f"tool {tool.name!r}: mode {tool.mode!r}, but tool {other.name!r} of the "
                    f"same backend {tool.backend!r} has {other.mode!r} (they share a breaker)"
                )
        self._tools[tool.name] = tool
        return tool

    @property
    def tools(self) -> Mapping[str, Tool]:
        return self._tools

    async def call_tool(
        self, agent: str, name: str, args: Any = None, *, credential: str = "default"
    ) -> ToolResult:
        """Call a registered tool for `agent` with `args` under `credential`, through its
        breaker (key `<backend>@<credential>`) and retry budget, and answer with the structured
        result the model acts on (`ok` with the data, `circuit_open`, `tool_error`, ...). It
        never raises for what the backend did; a function tool's own error (one the policy
        does not classify, `classify.function_attempt`) is raised again once the call is
        recorded, uncounted."""
        tools = self._tools
        if name not in tools:
            known = ", ".join(sorted(tools)) or "none"
            return results.invalid_request(name, f"no tool named {name!r}; known tools: {known}")
        return await self._call(agent, tools[name], credential, args, args)

    async def _call(
        self, agent: str, tool: Tool, credential: str, args: Any, checked: Any
    ) -> ToolResult:
        """One call of `tool` with `args` (what its attempts are given; `checked`: what the
        argument schema and the authorizer are): `call_tool`'s, or an async guard's."""
        body = json_body(args) if tool.function is None else None
        key = self._keys[agent, tool.backend, credential, tool.mode]
        deadlines = self._loop_deadlines()
        budget = RetryBudget(
            self, tool, key, agent, credential, args, body, deadlines, tool.call_attempts
        )
        if not budget.clear:
            refused = self._refusal(budget, checked)
            if refused is not None:
                return refused
        return await self._run(budget, tool.lease, tool.probe_wait_seconds)

    def _refusal(self, budget: RetryBudget, args: Any) -> ToolResult | None:
        """The checks before any request, for a call whose budget found something to check
        (`RetryBudget.clear`): a refusal is answered and written here."""
        tool, call = budget.tool, budget.call
        refusal = self._precheck(call.agent, tool, args, call, budget.body)
        if refusal is None:
            return None
        outcome = Outcome(refusal.cls, detail=refusal.reason)
        result = results.tool_result(tool.name, outcome, None, 0, budget.credential)
        return self._refused(call, outcome, result["status"], result)

    def _denied(self, budget: RetryBudget, admission: Admission) -> ToolResult:
        tool = budget.tool
        reason = self.open_reason(budget.call.key)
        return results.denied(tool.name, admission, reason, tool.alternatives)

    def _precheck(
        self, agent: str, tool: Tool, args: Any, call: Call, body: Body
    ) -> Refusal | None:
        if tool.args_schema is not None:
            try:
                tool.args_schema.model_validate(args)
            except ValidationError as error:
                fix = "; ".join(
                    f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}"
                    for e in error.errors()
                )
                return Refusal(OutcomeClass.CALLER_ERROR, f"arguments rejected: {fix}")
        if isinstance(body, Refusal):
            return body
        if self.authorize is not None:
            refusal = self.authorize(agent, tool, args)
            if refusal is not None:
                return refusal
        if call.credential_revoked:
            return Refusal(OutcomeClass.CREDENTIAL_REVOKED, "credential revoked")
        return None

    async def _attempt(self, budget: RetryBudget) -> Attempt:
        """One attempt under the tool's deadline (a function tool's inline: a helper coroutine
        per attempt would cost as much as the deadline)."""
        tool, deadlines = budget.tool, budget.deadlines
        assert deadlines is not None
        call = budget.call
        call.attempts += 1
        function = tool.function
        if function is None:
            return await self._http_attempt(budget, deadlines)
        number = deadlines.start(tool.deadline_seconds)
        try:
            value = await function(budget.args)
        except BaseException as error:
            return self._attempt_failed(tool, call.key, deadlines, number, error)
        deadlines.stop(number)
        if tool.plain:  # `_classified`'s hot path, inline, its value kept by the budget
            budget.data = value
            return PLAIN_SUCCESS
        return self._classified(tool, call.key, value, None)

    def _attempt_failed(
        self, tool: Tool, key: str, deadlines: Deadlines, number: int, error: BaseException
    ) -> Attempt:
        """A function tool's attempt that raised, its deadline stopped: cut by that deadline,
        its timeout; the function's own exception, classified; any other cancellation (or a
        `BaseException` that is no error, `KeyboardInterrupt`) is raised again."""
        cut = deadlines.stop(number)
        if isinstance(error, asyncio.CancelledError):
            if not cut:
                raise error
            return deadline_attempt(tool.deadline_seconds)
        if not isinstance(error, Exception):
            raise error
        return self._classified(tool, key, None, error)

    def _classified(self, tool: Tool, key: str, value: Any, error: Exception | None) -> Attempt:
        """A function tool's result: by its own classifier, or by the policy's rules for
        function tools (`function_attempt`), the same for every door that runs one."""
        if error is None and tool.plain:
            return Attempt(SUCCESS, "ok", None, value)  # the hot path
        classifier = tool.classifier
        if classifier is not default_classifier:
            return _custom_classified(classifier, value, error)
        engine = self.engine
        return function_attempt(
            value,
            error,
            schema=tool.response_schema,
            deadline=tool.deadline_seconds,
            credential_worked=functools.partial(engine.credential_worked, key),
            now_wall=engine.clock.wall,
            arguments=self.argument_errors,
        )

    async def _http_attempt(self, budget: RetryBudget, deadlines: Deadlines) -> Attempt:
        tool, call, content = budget.tool, budget.call, budget.body
        assert not isinstance(content, Refusal)  # a call whose body is one is refused first
        client = self.clients[tool.backend]
        request = client.build_request(
            tool.method,
            tool.path,
            content=content,
            headers={
                **json_headers(content),
                "Idempotency-Key": self.engine.idempotency_key(call.number),
                "Authorization": f"Bearer {budget.credential}",
            },
            timeout=tool.deadline_seconds,
        )
        try:
            response = await deadlines.run(tool.deadline_seconds, client.send(request))
        except (httpx.HTTPError, TimeoutError) as error:
            return tool_error_attempt(error, request, tool.deadline_seconds)
        return tool_response_attempt(
            response,
            schema=tool.response_schema,
            deadline=tool.deadline_seconds,
            credential_worked=self.engine.credential_worked(call.key),
            now_wall=self.engine.clock.wall(),
        )

    def open_reason(self, key: str) -> str:
        return self.engine.open_reason(key)

    def guard(
        self, tool: str | Tool, *, sleep: Callable[[float], None] = time.sleep
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Wrap a function in a tool's breaker and retry budget: a plain function stays a plain
        function (its retries wait with `sleep`), an `async def` stays a coroutine function
        (its attempts run under the tool's deadline, and it may wait for a probe).

        The function is the tool's work, so it needs no registration of its own: `tool` is a
        registered tool's name (its backend, budget and classifier apply), a `Tool` giving the
        settings, or any other name, which guards with the defaults and the name as backend.
        The guarded function takes `agent=` and `credential=` besides its own arguments.
        """
        settings = self._guarded_tool(tool)

        def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
            if inspect.iscoroutinefunction(function):
                return self._guard_async(settings, function)
            return self._guard_sync(settings, function, sleep)

        return decorate

    def _guard_sync(
        self, settings: Tool, function: Callable[..., Any], sleep: Callable[[float], None]
    ) -> Callable[..., ToolResult]:
        keys, backend, mode = self._keys, settings.backend, settings.mode
        attempts = _guard_attempts(settings)
        classified = self._classified
        plain = settings.plain

        def attempt(budget: RetryBudget) -> Attempt:
            """An attempt with the call's arguments (`budget.args`), classified. (A closure made
            once per function: no partial and bound method to go through on every call.)"""
            args, kwargs = budget.args
            try:
                value = function(*args, **kwargs)
            except Exception as error:
                return classified(settings, budget.call.key, None, error)
            if plain:  # `_classified`'s hot path, inline, its value kept by the budget
                budget.data = value
                return PLAIN_SUCCESS
            return classified(settings, budget.call.key, value, None)

        @functools.wraps(function)
        def guarded(
            *args: Any, agent: str = "local", credential: str = "default", **kwargs: Any
        ) -> ToolResult:
            key = keys[agent, backend, credential, mode]
            packed = (args, kwargs)
            budget = RetryBudget(
                self, settings, key, agent, credential, packed, None, None, attempts
            )
            if not budget.clear:
                refused = self._refusal(budget, kwargs)
                if refused is not None:
                    return refused
            return self._run_sync(budget, settings.lease, attempt, sleep)

        return guarded

    def _guard_async(
        self, settings: Tool, function: Callable[..., Awaitable[Any]]
    ) -> Callable[..., Awaitable[ToolResult]]:
        async def unpacked(packed: tuple[tuple[Any, ...], dict[str, Any]]) -> Any:
            args, kwargs = packed
            return await function(*args, **kwargs)

        tool = dataclasses.replace(settings, function=unpacked)

        @functools.wraps(function)
        async def guarded(
            *args: Any, agent: str = "local", credential: str = "default", **kwargs: Any
        ) -> ToolResult:
            return await self._call(agent, tool, credential, (args, kwargs), kwargs)

        return guarded

    def _guarded_tool(self, tool: str | Tool) -> Tool:
        if isinstance(tool, Tool):
            return tool
        return self._tools.get(tool) or Tool(tool, backend=tool)


class RetryBudget(Retries[Attempt]):
    """One `call_tool` or `guard` call's retry budget (the rule is `Retries`'): its answer is
    the tool's structured result, made once in `completion()` (its status is the line's)."""

    __slots__ = (
        "answered",
        "args",
        "body",
        "clear",
        "credential",
        "data",
        "deadlines",
        "result",
        "tool",
    )

    def __init__(
        self,
        harness: Harness,
        tool: Tool,
        key: str,
        agent: str,
        credential: str,
        args: Any,
        body: Body,
        deadlines: Deadlines | None,
        attempts: int,
    ) -> None:
        """The budget opens the call's entry (`Engine.enter`, on `key`) and says whether
        anything is to be checked before a request (`clear`). `args`, `body` and `deadlines`
        are what an async attempt sends and runs under; the sync `guard` passes its function's
        `(args, kwargs)` and None. `attempts`: at most, as the door's retry rule allows
        (`Tool.call_attempts`). (`Retries`' fields are set here, not through its constructor:
        a budget is made for every call, and that second constructor was one call in every
        twenty-six of `Harness.guard`'s, as a separate method for the entry and the checks.)"""
        engine = self.engine = harness.engine
        call = self.call = engine.enter(key, agent, tool.backend, tool.name, tool.deadline_seconds)
        self.limit = attempts
        self.backoff = tool.backoff_seconds
        self.rounds = 0
        self.tried = None
        self.stopped = False
        self.tool = tool
        self.credential = credential
        self.args = args
        self.body = body
        self.deadlines = deadlines
        self.result: ToolResult | None = None
        self.answered: ToolResult | None = None
        #: What a plain success's function returned (its attempt is `PLAIN_SUCCESS`).
        self.data: Any = None
        #: Nothing to check before a request (no argument schema, no authorizer, a credential
        #: not revoked, a body that could be encoded): the common case.
        self.clear = (
            tool.args_schema is None
            and harness.authorize is None
            and not call.credential_revoked
            and (body is None or type(body) is bytes)
        )

    def completion(self) -> Completion:
        """What `Engine.complete` takes: outcome, fault, agent status, refresh, platform status.
        The answer is made here, once: its status is the line's (`answered`, unless the
        function's own error is to be raised again: `answer()`)."""
        attempt = self.tried
        assert attempt is not None
        if self.stopped:
            status: int | str = "circuit_open"
        else:
            data = self.data if attempt is PLAIN_SUCCESS else attempt.data
            result = self.result = results.tool_result(
                self.tool.name, attempt.outcome, data, self.call.attempts, self.credential
            )
            if attempt.raised is None:
                self.answered = result
            status = result["status"]
        return attempt.outcome, attempt.fault, status, None, attempt.platform_status

    def answer(self) -> ToolResult:
        """The answer `completion()` did not make: a stopped retry's `circuit_open`; or, for a
        function tool's own error, that error again (the call is completed by now,
        uncounted)."""
        result = self.result
        if result is not None:
            raised = self.tried.raised if self.tried is not None else None
            if raised is not None:
                raise raised
            return result
        return self.circuit_open(self.tool.name, self.tool.alternatives)


class _Keys(dict[tuple[str, str, str, str | None], str]):
    """The engine's key for each (agent, backend, credential, tool mode) a harness has called,
    made once (`Engine.key_for`): a lookup that makes no call. A key is found the first time a
    tool with its own `mode` calls it, and that mode is configured then (`Tool.mode`; an
    operator's write still wins). As many entries as the pairs of callers and credentials the
    engine already keeps a breaker and a caller list for."""

    def __init__(self, engine: Engine) -> None:
        super().__init__()
        self._engine = engine
        #: The keys a tool's own `mode` has been configured for.
        self._moded: set[str] = set()

    def __missing__(self, asked: tuple[str, str, str, str | None]) -> str:
        agent, backend, credential, mode = asked
        key = self[asked] = self._engine.key_for(agent, backend, credential)
        if mode is not None and key not in self._moded:
            self._engine.configure_mode(key, mode)
            self._moded.add(key)
        return key


def json_body(args: Any) -> Body:
    """The arguments as every attempt will send them, encoded before the breaker is asked.

    Encoding is where a datetime, a NaN, a cycle, a lone surrogate or absurd nesting fails;
    found after admission it raised out of the call holding the probe slot, which then expired
    as a counted failure against a healthy backend. Found here it is the caller's to fix, like
    an argument schema.
    The form is httpx's own `json=` encoding: compact UTF-8, no NaN.
    """
    if args is None:
        return None
    try:
        text = json.dumps(args, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return text.encode()  # a lone surrogate fails here, as UnicodeEncodeError
    except (TypeError, ValueError, RecursionError) as error:
        return Refusal(OutcomeClass.CALLER_ERROR, f"arguments cannot be sent as JSON: {error}")


def json_headers(content: bytes | None) -> dict[str, str]:
    return {} if content is None else {"Content-Type": "application/json"}


def _guard_attempts(tool: Tool) -> int:
    """`guard` runs a function, so it is a function tool's rule: retried only when marked."""
    return tool.attempts if tool.idempotent else 1


def _custom_classified(classifier: Classifier, value: Any, error: Exception | None) -> Attempt:
    """A function tool's result through its own classifier (the same contract as HTTP tools:
    a counted outcome is retried). A classifier that raises calls the error the tool's own."""
    try:
        outcome = classifier(value, error)
    except Exception as own:
        return Attempt(own_error(own), "error", raised=own)
    if error is not None:
        fault = network_fault(error)
    else:
        fault = "ok" if outcome.cls is _SUCCESS else "error"
    return Attempt(outcome, fault, None, value, outcome.counted)


_SUCCESS = OutcomeClass.SUCCESS
