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

A call takes a ticket (a number, a line) only when someone reads its line: a listener or the
audit log, or a breaker not closed (its admission is a decision). Otherwise a closed breaker
lets the body run with nothing written, and a success that changes nothing costs nothing more;
a failure takes its ticket on the way out. A watched entry a closed breaker lets in keeps its
ticket as the very numbers its line will carry (`CallDetails`), made into a `Call` only if it
leaves with something to record; a success that changes nothing writes that line directly.
With the audit log alone (a state dir, no listener) those numbers hold no call number yet (0):
the audit log keeps no successes, so only a failure draws one, on its way out, and its line
still says when it was let in.
"""

from __future__ import annotations

import contextvars
from types import TracebackType
from typing import TYPE_CHECKING, Protocol

from breakerdeck.engine import results
from breakerdeck.engine.core.breaker import Admission
from breakerdeck.engine.core.classify import Classifier, default_classifier, network_fault
from breakerdeck.engine.events import QUIET_ENDING, CallDetails
from breakerdeck.engine.outcomes import ABANDONING, SUCCESS, Outcome
from breakerdeck.engine.parts.call import Call
from breakerdeck.engine.policy import AgentPolicy
from breakerdeck.engine.results import ToolResult
from breakerdeck.engine.state import State

if TYPE_CHECKING:
    from breakerdeck.engine.parts.operations import Parts

_CLOSED = State.CLOSED


class Entries(Protocol):
    """What a guard asks of its engine (`Engine`): admit a call, complete it, word a refusal."""

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
        engine: Entries,
        parts: Parts,
        key: str,
        *,
        agent: str,
        lease: float,
        tool: str | None = None,
        deadline_seconds: float = 30.0,
        classifier: Classifier = default_classifier,
    ) -> None:
        self.engine = engine
        self.key = key
        self.agent = agent
        self.lease = lease
        self.tool = tool or key
        self.deadline_seconds = deadline_seconds
        self.classifier = classifier
        self._slot = parts.keys.slot(key, agent)
        self._ledger = parts.ledger
        self._lines = parts.lines
        self._epoch = parts.lines.epoch
        self._outbox = parts.outbox
        self._durability = parts.durability
        #: Under `agent` a key has no credential of its own to learn of.
        self._credential_known = isinstance(parts.policy, AgentPolicy)
        self._wall = parts.wall
        self._monotonic = parts.clock.monotonic
        self._platform = key.partition("@")[0]
        #: This context's entries that took a ticket, innermost last: an outermost entry
        #: that took none is not on it; one a closed breaker let in is its line's numbers.
        self._calls: contextvars.ContextVar[tuple[Call | CallDetails, ...]] = (
            contextvars.ContextVar(f"guard:{key}", default=())
        )

    def __repr__(self) -> str:
        return f"Guard({self.key!r}, agent={self.agent!r})"

    # -- sync ------------------------------------------------------------------------------

    def __enter__(self) -> None:
        # A closed breaker lets the context's outermost entry in at once (an inner one takes a
        # ticket: it finds its own on leaving), with nothing to keep when nobody reads its line
        # (no listener, no audit log).
        if self._slot.breaker.state is _CLOSED and not self._calls.get():
            if self._outbox.watched:
                self._keep_numbers()
            return
        call = self._entered()
        self._admitted(call, self.engine.admit(call, self.lease))

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if error is None and self._left_quietly():
            return
        call = self._leaving(error)
        if isinstance(error, ABANDONING):
            self.engine.abandon(call)
        else:
            self.engine.complete(call, *self._outcome(error))

    # -- async -----------------------------------------------------------------------------

    async def __aenter__(self) -> None:
        if self._slot.breaker.state is _CLOSED and not self._calls.get():
            if self._outbox.watched:
                self._keep_numbers()
            return
        call = self._entered()
        self._admitted(call, await self.engine.admit_async(call, self.lease))

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if error is None and self._left_quietly():
            return
        call = self._leaving(error)
        if isinstance(error, ABANDONING):
            self.engine.abandon(call)  # no await once cancelled, or in a closing generator
        else:
            await self.engine.complete_async(call, *self._outcome(error))

    # -- the one body of both --------------------------------------------------------------

    def _keep_numbers(self) -> None:
        """An entry a closed breaker let in keeps the numbers its line will carry."""
        ledger = self._ledger
        numbers = (
            ledger.next_call() if self._outbox.listeners else 0,  # 0: drawn when a line needs it
            self._platform,
            self.tool,
            self._wall(),
            "normal",
            1,
            self.deadline_seconds,
            ledger.numbered,
            self._epoch,
        )
        self._calls.set((numbers,))

    def _entered(self) -> Call:
        """The ticket of an entry the breaker must admit (one not closed, or an inner entry).
        A refusal nobody reads is raised at once, with no ticket."""
        slot = self._slot
        if slot.breaker.state is not _CLOSED and not self._outbox.watched:
            refusal = slot.cooling(self._monotonic())
            if refusal is not None:
                raise BreakerOpen(self._refusal(refusal))
        return self._ticket()

    def _left_quietly(self) -> bool:
        """A success that went without a ticket and changes nothing (a closed breaker with
        nothing counted, a credential known to work) records nothing; one that kept its line's
        numbers writes that line only for a listener (the audit log keeps no successes). False:
        the entry has something to record."""
        slot = self._slot
        b = slot.breaker
        known = self._credential_known or slot.credential_worked_at is not None
        if b.state is not _CLOSED or not known or b.count:
            return False
        calls = self._calls
        entries = calls.get()
        if not entries:
            return True
        if type(entries[-1]) is tuple and not self._outbox.listeners:
            calls.set(entries[:-1])
            return True
        return self._quietly_left(entries)

    def _quietly_left(self, entries: tuple[Call | CallDetails, ...]) -> bool:
        """A success that changes nothing, leaving an entry a closed breaker let in: its line
        written here, as `Engine.complete` would (none when no listener reads it: the audit
        log keeps no successes). False: the entry has something to record after all."""
        entry = entries[-1]
        if isinstance(entry, Call):
            return False
        self._calls.set(entries[:-1])
        if not self._outbox.listeners:
            return True
        if not entry[0]:  # a listener came since its entry: its line needs a number now
            entry = (self._ledger.next_call(), *entry[1:])
            entries = (*entries[:-1], entry)
        if self._lines.quiet_line(self._slot, self.agent, entry, SUCCESS, QUIET_ENDING) is None:
            self._calls.set(entries)  # it changed meanwhile: `_leaving` makes it a ticket
            return False
        self._ledger.deliver()
        return True

    def _leaving(self, error: BaseException | None) -> Call:
        """The ticket to complete the entry now leaving with: its own (made from its line's
        numbers if it kept only those), or (an entry that went without, with something to
        record) one taken now."""
        entries = self._calls.get()
        if entries:
            self._calls.set(entries[:-1])
            entry = entries[-1]
            if isinstance(entry, Call):
                return entry
            number, _, _, wall, admitted_as, attempts, _, seq, _ = entry
            call = self._ticket(number or None)
            call.admitted_wall, call.admitted_as, call.admitted_seq = wall, admitted_as, seq
            call.attempts = attempts
            return call
        call = self._ticket()
        call.admitted_as = "normal"
        call.attempts = 1
        return call

    def _ticket(self, number: int | None = None) -> Call:
        return Call(
            self._ledger.next_call() if number is None else number,
            self.key,
            self.agent,
            self._platform,
            self.tool,
            self.deadline_seconds,
        )

    def _admitted(self, call: Call, admission: Admission) -> None:
        if not admission.allowed:
            raise BreakerOpen(self._refusal(admission))
        call.attempts = 1
        self._calls.set((*self._calls.get(), call))

    def _outcome(self, error: BaseException | None) -> tuple[Outcome, str, str]:
        if error is None:
            return SUCCESS, "ok", "ok"
        outcome = self.classifier(None, error)
        status = "tool_error" if outcome.counted else outcome.cls.value
        return outcome, network_fault(error), status

    def _refusal(self, admission: Admission) -> ToolResult:
        return results.denied(self.tool, admission, self.engine.open_reason(self.key), ())
