"""Each call's entry, and the one rule for a call nobody reads, written once for every door.

A call opens with its entry (`enter`) and closes with it (`Engine.complete`). In between, the
engine takes the key's lock only when the call's admission or end is a decision or a line
someone reads. The rule, here and nowhere else:

- a closed breaker lets a call in with no lock (`admitted`); with no listener a call may
  go in with no entry at all (`quiet_entry`), keeping only when it went in if the audit log
  would keep its failure's line; with no listener a breaker in its cooldown refuses without
  the breaker's decision (`Lines.refused`, for entries and `Engine.guard` alike: no lock and no
  line when nobody reads one, its audit row under the key's lock on a state dir);
- a success ends with no lock and no line when the key is closed with nothing counted and a
  credential known to work (`Slot.quiet`) and no listener reads it (the audit log keeps no
  successes); so does an abandoned call's neutral end when nobody reads a line
  at all (`ends_unread`).
"""

from __future__ import annotations

from breakerdeck.engine.core.breaker import ADMIT_NORMAL, Admission
from breakerdeck.engine.outcomes import ABANDONED, Outcome, OutcomeClass
from breakerdeck.engine.parts.call import Call
from breakerdeck.engine.parts.keys import Slot
from breakerdeck.engine.parts.operations import Parts
from breakerdeck.engine.policy import AgentPolicy
from breakerdeck.engine.state import State

_CLOSED = State.CLOSED
_SUCCESS = OutcomeClass.SUCCESS

#: What a call that went in quietly keeps of its admission: its wall time and the seq it was
#: let in at, or nothing (`()`) when no line of it could be read.
Kept = tuple[float, int] | tuple[()]
_NOTHING_KEPT: Kept = ()


class Entries:
    def __init__(self, parts: Parts) -> None:
        keys = self._keys = parts.keys
        self._slots = keys.slots
        self._ledger = ledger = parts.ledger
        self._draw = ledger.next_call
        self._outbox = parts.outbox
        self._agent_policy = isinstance(parts.policy, AgentPolicy)
        self._wall = parts.wall
        self._monotonic = parts.clock.monotonic
        self._refused = parts.lines.refused

    def enter(
        self, key: str, agent: str, platform: str, tool: str, deadline_seconds: float
    ) -> Call:
        """One call's entry, `agent` noted among the key's callers, and whether the key's
        credential is revoked (`Call.credential_revoked`). (A membership test and a lookup, not
        `dict.get`: every door's call comes this way, and a slot is never removed.)"""
        slots, keys = self._slots, self._keys
        slot = slots[key] if key in slots else keys.slot(key, agent)
        if agent not in slot.agents:
            slot = keys.slot(key, agent)
        draw = self._draw  # as `entry`, inline
        number = draw() if self._outbox.listeners else 0
        revoked = slot.credential_revoked
        return Call(draw, key, agent, platform, tool, deadline_seconds, number, revoked)

    def entry(
        self, key: str, agent: str, platform: str, tool: str, deadline_seconds: float
    ) -> Call:
        """One call's entry on a key `agent` is known to call. Its number is drawn now when a
        listener will read its line (in the order calls arrive), else only when something
        needs one (`Call.number`)."""
        draw = self._draw
        number = draw() if self._outbox.listeners else 0
        return Call(draw, key, agent, platform, tool, deadline_seconds, number)

    def enter_late(
        self,
        key: str,
        agent: str,
        platform: str,
        tool: str,
        deadline_seconds: float,
        kept: Kept = (),
    ) -> Call:
        """The entry of a call that went in quietly (`quiet_entry`) and leaves with something
        to record: let in as normal, one attempt made, with the admission it kept (`kept`:
        when, and at which seq) or, when nobody was reading, none."""
        call = self.enter(key, agent, platform, tool, deadline_seconds)
        call.admitted_as = "normal"
        call.attempts = 1
        if kept:
            call.admitted_wall, call.admitted_seq = kept
        return call

    def quiet_entry(self, slot: Slot) -> Kept | None:
        """Whether a call may go in with no entry (its breaker is closed and no listener
        reads a line), and what it keeps if so: when it went in and at which seq, for the
        line of a failure the audit log keeps (`()` with no audit log: nobody reads any).
        None: it takes its entry."""
        seq = self._ledger.numbered  # read before the state, as `admitted` reads it
        outbox = self._outbox
        if slot.breaker.state is not _CLOSED or outbox.listeners:
            return None
        return (self._wall(), seq) if outbox.watched else _NOTHING_KEPT

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

    def succeeds_unread(self, slot: Slot) -> bool:
        """`ends_unread` for a success of a call that went in with no entry (`quiet_entry`),
        on its key's slot."""
        return not self._outbox.listeners and slot.quiet(self._agent_policy)
