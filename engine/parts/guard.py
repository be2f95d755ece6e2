"""`Engine.guard(key, agent=…, lease=…)`: a reusable per-key guard for code that makes its own
calls (DESIGN, "tool policy"), in the article's shape:

    guard = engine.guard("search@default", agent="planner")
    try:
        with guard:                 # or: async with guard:
            answer = search(query)
    except BreakerOpen as refused:
        return refused.result       # circuit_open / probe_in_flight, as the model gets it

Entering admits the call (as normal, or as the one probe) or raises `BreakerOpen` carrying the
refusal's structured result; leaving records a success, or classifies the exception (the
function tools' classifier) and lets it propagate. A body its caller abandons (the task
cancelled from outside, `KeyboardInterrupt`, `SystemExit`, or `GeneratorExit` when a generator
holding the guard is closed) is completed neutral (`Engine.abandon`), never classified. One
guard serves any number of threads and tasks at once: each entry's call is kept in a context
variable, not on the guard.

Each entry is the engine's (`parts/entries.py`, `Engine.admit`, `Engine.complete`): the guard
decides nothing itself. The one thing it skips is an entry: when the rule says a call goes in
quietly (`Entries.quiet_entry`: closed) the context's outermost entry takes none (it keeps its
line's numbers when someone may read a line: a listener, or the audit log for a failure), and
a success that changes nothing records nothing but its line for a listener
(`Entries.succeeded`); anything else takes its entry on the way out (`enter_late`). A refusal
in the cooldown that no listener reads takes no entry either (`Lines.refused`: the audit log's
row, if any, is written all the same). Going in is one body (`_entering`) for both drivers,
which differ only in how they wait for the breaker's decision: one frame more on a healthy
call than each driver's own copy was, for one place to read the rule from.
"""

from __future__ import annotations

import contextvars
from types import TracebackType
from typing import Protocol

from breakerdeck.engine import results
from breakerdeck.engine.core.breaker import Admission
from breakerdeck.engine.core.classify import Classifier, default_classifier, network_fault
from breakerdeck.engine.outcomes import ABANDONING, SUCCESS, Outcome
from breakerdeck.engine.parts.call import Call
from breakerdeck.engine.parts.entries import SUCCEEDED, Entries, Kept
from breakerdeck.engine.parts.keys import Slot
from breakerdeck.engine.parts.operations import Parts
from breakerdeck.engine.results import ToolResult

#: A context's entries on one guard: a list holding what an outermost entry that went in
#: quietly kept of its admission (empty: none is in), emptied in place when it leaves (never
#: reset: a task or thread started inside it shares the list, reads it as an entry in
#: progress and takes entries of its own); or the context's previous value with its own entry.
Taken = list[Kept] | tuple["Taken", Call]

#: No entry yet in a context. Never emptied nor filled: only a list an entry set holds
#: anything to take.
_NONE: list[Kept] = []

#: A success's fault and status, as its line keeps them (`SUCCEEDED`).
_OK = SUCCEEDED[1:3]


class Engine(Protocol):
    """What a guard asks of its engine: admit a call, complete it, word a refusal."""

    def admit(self, call: Call, lease: float) -> Admission: ...
    async def admit_async(self, call: Call, lease: float) -> Admission: ...
    def complete(
        self, call: Call, outcome: Outcome, fault: str, agent_status: int | str
    ) -> object: ...
    async def complete_async(
        self, call: Call, outcome: Outcome, fault: str, agent_status: int | str
    ) -> object: ...
    def abandon(self, call: Call) -> Outcome: ...
    def open_reason(self, key: str) -> str: ...


class BreakerOpen(Exception):
    """The breaker refused the call: `result` is what the model (or the caller) acts on."""

    def __init__(self, result: ToolResult) -> None:
        super().__init__(result.get("reason") or result["status"])
        self.result = result


class Guard:
    def __init__(
        self,
        engine: Engine,
        entries: Entries,
        parts: Parts,
        slot: Slot,
        key: str,
        *,
        agent: str,
        lease: float,
        tool: str | None = None,
        deadline_seconds: float = 30.0,
        classifier: Classifier = default_classifier,
    ) -> None:
        self.engine = engine
        self._entries = entries
        self._slot = slot
        self.key = key
        self.agent = agent
        self.lease = lease
        self.tool = tool or key
        self.deadline_seconds = deadline_seconds
        self.classifier = classifier
        self._platform = key.partition("@")[0]
        # What every entry asks, read once per guard.
        self._quiet_entry = entries.quiet_entry
        self._succeeded = entries.succeeded
        self._refused = parts.lines.refused
        self._monotonic = parts.clock.monotonic
        self._calls: contextvars.ContextVar[Taken] = contextvars.ContextVar(
            f"guard:{key}", default=_NONE
        )

    def __repr__(self) -> str:
        return f"Guard({self.key!r}, agent={self.agent!r})"

    # -- the drivers: sync and async differ only in how they wait ----------------------------

    def __enter__(self) -> None:
        call = self._entering()
        if call is not None:
            self._admitted(call, self.engine.admit(call, self.lease))

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        taken = self._calls.get()
        if error is None and type(taken) is list and self._succeeded(self._slot, self.agent, taken):
            return
        if (call := self._leaving(taken, error)) is not None:
            self.engine.complete(call, *self._outcome(error))

    async def __aenter__(self) -> None:
        call = self._entering()
        if call is not None:
            self._admitted(call, await self.engine.admit_async(call, self.lease))

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        taken = self._calls.get()
        if error is None and type(taken) is list and self._succeeded(self._slot, self.agent, taken):
            return
        if (call := self._leaving(taken, error)) is not None:
            await self.engine.complete_async(call, *self._outcome(error))

    # -- the one body of both --------------------------------------------------------------

    def _entering(self) -> Call | None:
        """Go in: quietly with no entry (`Entries.quiet_entry`), or refused at once
        (`BreakerOpen`: a refusal in the cooldown nobody but the audit log reads takes no entry,
        `Lines.refused`), or let in without the breaker's decision (`Entries.admitted`); else
        the entry the breaker is to decide on, as each driver asks it."""
        taken = self._calls.get()
        if not taken:
            kept = self._quiet_entry(self._slot, self._platform, self.tool, self.deadline_seconds)
            if kept is not None:
                if kept:
                    self._calls.set([kept])
                return None
        refusal = self._refused(self._slot, self.agent, self._platform, self._monotonic())
        if refusal is not None:
            self._admitted(None, refusal)
        call = self._entries.entry(
            self.key, self.agent, self._platform, self.tool, self.deadline_seconds
        )
        early = self._entries.admitted(call)
        if early is None:
            return call
        self._admitted(call, early)
        return None

    def _admitted(self, call: Call | None, admission: Admission) -> None:
        """A refusal raised, or the call kept on the context over the entry it is nested in."""
        if not admission.allowed:
            raise BreakerOpen(
                results.denied(self.tool, admission, self.engine.open_reason(self.key), ())
            )
        assert call is not None  # only a refusal is decided before its entry
        call.attempts = 1
        calls = self._calls
        calls.set((calls.get(), call))

    def _leaving(self, taken: Taken, error: BaseException | None) -> Call | None:
        """The entry to complete with the body's outcome: this one's own, or (one that went in
        quietly, with something to record) one taken now with what it kept. None: a success
        that changes nothing, or a body its caller abandoned, completed neutral here (no
        await once cancelled, nor in a closing generator)."""
        if isinstance(taken, tuple):  # its own entry, over the context's previous value
            previous, call = taken
            self._calls.set(previous)
            if error is None and self._entries.ends_unread(call, SUCCESS):
                return None
        else:
            kept = taken.pop() if taken else ()
            call = self._entries.enter_late(
                kept, self.key, self.agent, self._platform, self.tool, self.deadline_seconds
            )
        if isinstance(error, ABANDONING):
            self.engine.abandon(call)
            return None
        return call

    def _outcome(self, error: BaseException | None) -> tuple[Outcome, str, str]:
        if error is None:
            return SUCCESS, *_OK
        outcome = self.classifier(None, error)
        status = "tool_error" if outcome.counted else outcome.cls.value
        return outcome, network_fault(error), status
