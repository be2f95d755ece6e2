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
decides nothing itself. The one thing it skips is an entry nobody could read: when the rule
says a call goes in quietly (`Entries.quiet_entry`: closed, no listener) the context's
outermost entry takes none (on a state dir it keeps when it went in, for the audit row of a
failure), and a success that changes nothing records nothing (`Entries.ends_unread`);
anything else takes its entry on the way out (`enter_late`).
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
from breakerdeck.engine.parts.entries import Entries, Kept
from breakerdeck.engine.parts.keys import Slot
from breakerdeck.engine.results import ToolResult


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
        #: This context's entries, innermost last; an outermost entry that went in quietly
        #: (`Entries.quiet_entry`) is on it only as what it kept of its admission (with an
        #: audit log), else not at all.
        self._calls: contextvars.ContextVar[tuple[Call | Kept, ...]] = contextvars.ContextVar(
            f"guard:{key}", default=()
        )

    def __repr__(self) -> str:
        return f"Guard({self.key!r}, agent={self.agent!r})"

    # -- the drivers: sync and async differ only in how they wait ----------------------------

    def __enter__(self) -> None:
        call = self._entering()
        if call is not None:
            early = self._entries.admitted(call)
            self._admitted(call, early or self.engine.admit(call, self.lease))

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        call = self._leaving(error)
        if call is None:
            return
        if isinstance(error, ABANDONING):
            self.engine.abandon(call)
        else:
            self.engine.complete(call, *self._outcome(error))

    async def __aenter__(self) -> None:
        call = self._entering()
        if call is not None:
            early = self._entries.admitted(call)
            self._admitted(call, early or await self.engine.admit_async(call, self.lease))

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        call = self._leaving(error)
        if call is None:
            return
        if isinstance(error, ABANDONING):
            self.engine.abandon(call)  # no await once cancelled, or in a closing generator
        else:
            await self.engine.complete_async(call, *self._outcome(error))

    # -- the one body of both --------------------------------------------------------------

    def _entering(self) -> Call | None:
        """The entry to admit, or None: the context's outermost entry goes in quietly."""
        calls = self._calls
        if not calls.get():
            kept = self._entries.quiet_entry(self._slot)
            if kept is not None:
                if kept:
                    calls.set((kept,))
                return None
        return self._entries.entry(
            self.key, self.agent, self._platform, self.tool, self.deadline_seconds
        )

    def _admitted(self, call: Call, admission: Admission) -> None:
        if not admission.allowed:
            raise BreakerOpen(
                results.denied(self.tool, admission, self.engine.open_reason(self.key), ())
            )
        call.attempts = 1
        self._calls.set((*self._calls.get(), call))

    def _leaving(self, error: BaseException | None) -> Call | None:
        """The entry to complete now: this one's own, or (one that went in quietly, with
        something to record) one taken now with what it kept. None: a quiet success that
        changes nothing."""
        calls = self._calls
        taken = calls.get()
        kept: Kept = ()
        if taken:
            calls.set(taken[:-1])
            top = taken[-1]
            if type(top) is Call:  # not a kept pair: its own entry (`Call` is final)
                if error is None and self._entries.ends_unread(top, SUCCESS):
                    return None
                return top
            kept = top
        if error is None and self._entries.succeeds_unread(self._slot):
            return None
        return self._entries.enter_late(
            self.key, self.agent, self._platform, self.tool, self.deadline_seconds, kept
        )

    def _outcome(self, error: BaseException | None) -> tuple[Outcome, str, str]:
        if error is None:
            return SUCCESS, "ok", "ok"
        outcome = self.classifier(None, error)
        status = "tool_error" if outcome.counted else outcome.cls.value
        return outcome, network_fault(error), status
