"""Each call's entry, and the one rule for a call nobody reads, written once for every door.

A call opens with its entry (`enter`) and closes with it (`Engine.complete`). In between, the
engine takes the key's lock only when the call's admission or end is a decision or a line
someone reads. The rule, here and nowhere else:

- a closed breaker lets a call in with no lock (`admitted`); an outermost `Engine.guard` call
  goes in with no entry at all (`quiet_entry`), keeping only its line's numbers when someone
  reads a line (a listener, or the audit log for a failure); with no listener a breaker in
  its cooldown refuses without
  the breaker's decision (`Lines.refused`, for entries and `Engine.guard` alike: no lock and no
  line when nobody reads one, its audit row under the key's lock on a state dir);
- a success ends with no lock and no line when the key is closed with nothing counted and a
  credential known to work (`Slot.quiet`) and no listener reads it (the audit log keeps no
  successes); with a listener such a success writes its line alone, with no decision
  (`Lines.quiet_line`, as `succeeded` asks for a call that went in quietly); an abandoned
  call's neutral end takes no lock and no line when nobody reads a line at all
  (`ends_unread`).
"""

from __future__ import annotations

from breakerdeck.engine.core.breaker import ADMIT_NORMAL, Admission
from breakerdeck.engine.events import CallDetails
from breakerdeck.engine.outcomes import ABANDONED, SUCCESS, Outcome, OutcomeClass
from breakerdeck.engine.parts.call import Call
from breakerdeck.engine.parts.keys import Slot
from breakerdeck.engine.parts.operations import Parts
from breakerdeck.engine.policy import AgentPolicy
from breakerdeck.engine.state import State

_CLOSED = State.CLOSED
_SUCCESS = OutcomeClass.SUCCESS

#: What a call that went in quietly keeps of its admission: its line's numbers as a call let in
#: as normal, one attempt made, has them (`Lines.details`; its call number 0 until a line
#: needs one when no listener reads its line), or nothing (`()`) when no line of it could be
#: read.
Kept = CallDetails | tuple[()]
_NOTHING_KEPT: Kept = ()

#: How a guarded body that returned ends, as its line keeps it (`Engine.guard`'s): not a
#: probe, fault `ok`, status `ok`, no refresh, no platform status.
SUCCEEDED: tuple[bool, str, str, None, None] = (False, "ok", "ok", None, None)


class Entries:
    def __init__(self, parts: Parts) -> None:
        keys = self._keys = parts.keys
        self._slots = keys.slots
        self._ledger = parts.ledger
        self._outbox = parts.outbox
        self._agent_policy = isinstance(parts.policy, AgentPolicy)
        self._wall = parts.wall
        self._monotonic = parts.clock.monotonic
        self._refused = parts.lines.refused
        self._quiet_line = parts.lines.quiet_line
        self._epoch = parts.lines.epoch

    def enter(
        self,
        key: str,
        agent: str,
        platform: str,
        tool: str,
        deadline_seconds: float,
        number: int = 0,
    ) -> Call:
        """One call's entry, `agent` noted among the key's callers, and whether the key's
        credential is revoked (`Call.credential_revoked`). (A membership test and a lookup, not
        `dict.get`: every door's call comes this way, and a slot is never removed.) `number`:
        one its call drew already (`quiet_entry`)."""
        slots, keys = self._slots, self._keys
        slot = slots[key] if key in slots else keys.slot(key, agent)
        if agent not in slot.agents:
            slot = keys.slot(key, agent)
        draw = self._ledger.draw_call  # as `entry`, inline
        if not number and self._outbox.listeners:
            number = draw()
        revoked = slot.credential_revoked
        return Call(draw, key, agent, platform, tool, deadline_seconds, number, revoked)

    def entry(
        self, key: str, agent: str, platform: str, tool: str, deadline_seconds: float
    ) -> Call:
        """One call's entry on a key `agent` is known to call. Its number is drawn now when a
        listener will read its line (in the order calls arrive), else only when something
        needs one (`Call.number`)."""
        draw = self._ledger.draw_call
        number = draw() if self._outbox.listeners else 0
        return Call(draw, key, agent, platform, tool, deadline_seconds, number)

    def enter_late(
        self,
        kept: Kept,
        key: str,
        agent: str,
        platform: str,
        tool: str,
        deadline_seconds: float,
    ) -> Call:
        """The entry of a call that went in quietly (`quiet_entry`) and leaves with something
        to record: let in as normal, one attempt made, with the admission it kept (`kept`:
        its number if it drew one, when, and at which seq) or, when nobody was reading, none."""
        call = self.enter(key, agent, platform, tool, deadline_seconds, kept[0] if kept else 0)
        call.admitted_as = "normal"
        call.attempts = 1
        if kept:
            call.admitted_wall, call.admitted_seq = kept[3], kept[7]
        return call

    def quiet_entry(
        self, slot: Slot, platform: str, tool: str, deadline_seconds: float
    ) -> Kept | None:
        """Whether a call may go in with no entry (its breaker is closed), and what it keeps
        if so: its line's numbers when a line of it may be read (its call number drawn now,
        in the order calls arrive, when a listener will read it: else only if a failure's
        line for the audit log needs one), `()` when nobody reads any. None: it takes its
        entry."""
        seq = self._ledger.numbered  # read before the state, as `admitted` reads it
        outbox = self._outbox
        if slot.breaker.state is not _CLOSED:
            return None
        if not outbox.watched:
            return _NOTHING_KEPT
        number = self._ledger.draw_call() if outbox.listeners else 0
        wall = self._wall()
        return (number, platform, tool, wall, "normal", 1, deadline_seconds, seq, self._epoch)

    def admitted(self, call: Call) -> Admission | None:
        """The admissions the breaker need not decide: a closed breaker lets in with no lock,
        and (when no listener reads a refusal's line) one in its cooldown refuses
        (`Lines.refused`). None: the locked path decides."""
        slot = self._slots[call.key]
        # The seq is read before the state: if a trip lands in between, this call still reads
        # as admitted before it, which is what a closed breaker let in.
        seq = self._ledger.numbered
        if slot.breaker.state is _CLOSED:
            call.admitted_as = "normal"
            call.admitted_wall = self._wall()
            call.admitted_seq = seq
            return ADMIT_NORMAL
        return self._refused(slot, call.agent, call.platform, self._monotonic(), call)

    def ends_unread(self, call: Call, outcome: Outcome) -> bool:
        """Whether a call's end changes nothing and nobody reads it: a success on a quiet key
        (`Slot.quiet`) with no listener (the audit log keeps no successes), or an abandoned
        call's neutral end on a quiet key with no audit log either (it keeps every call that
        did not succeed). A call a shadow breaker would have refused always has its line."""
        if call.would_deny is not None:
            return False
        slot = self._slots[call.key]
        outbox = self._outbox
        if outcome.cls is _SUCCESS:
            return not outbox.listeners and slot.quiet(self._agent_policy)
        return outcome is ABANDONED and not outbox.watched and slot.quiet(self._agent_policy)

    def succeeded(self, slot: Slot, agent: str, taken: list[Kept]) -> bool:
        """Whether the success of a call that went in with no entry (`quiet_entry`, what it
        kept last in `taken`, emptied when it is over) is over: it changes nothing and nobody
        reads it (`ends_unread`), or a listener does and its line alone is written
        (`Lines.quiet_line`). False: it takes its entry now (`enter_late`) and the engine
        records it (so does one a listener came to after it went in: it drew no number)."""
        if self._outbox.listeners:
            kept = taken[-1] if taken else _NOTHING_KEPT
            if not kept or not kept[0]:
                return False
            if self._quiet_line(slot, agent, kept, SUCCESS, SUCCEEDED) is None:
                return False
        elif not slot.quiet(self._agent_policy):
            return False
        if taken:
            taken.pop()
        return True
