"""The key table: each key's breaker with what the engine knows around it, and its lock.

A slot is created on a key's first call and never removed. Readers on the call path hold no
lock, so a slot's lists are replaced, never edited in place; a slot allocates only what it
uses (its tallies appear with the key's first refusal or event).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from breakerdeck.engine.core.breaker import Admission, Breaker, DenyReason
from breakerdeck.engine.errors import UnknownKey
from breakerdeck.engine.parts.call import Call
from breakerdeck.engine.policy import AgentPolicy, ToolPolicy
from breakerdeck.engine.state import State

_MAKING = threading.Lock()
_CLOSED = State.CLOSED


@dataclass(slots=True)
class Slot:
    """A breaker with who calls it, its credential, its lock and its probe's ticket."""

    breaker: Breaker
    agents: tuple[str, ...] = ()
    credential_worked_at: float | None = None
    credential_revoked: bool = False
    #: Made on the key's first locked operation (`lock`): a key only ever called healthy,
    #: with nobody reading its lines, never takes it.
    made_lock: threading.RLock | None = None
    probe: Call | None = None
    #: The agents the last view put on an event named (None: none yet), so the first event
    #: on a key and the first call from a new agent carry the key's view. `agents` is
    #: replaced, never edited, by a longer tuple: an identity test says whether it moved.
    shown_agents: tuple[str, ...] | None = None
    #: The key's refusals by reason and its other events by `tally_name`, for metrics read at
    #: scrape time (DESIGN, "Metrics"): plain integer adds under the key's lock, no listener.
    denied: dict[DenyReason | None, int] | None = None
    tally: dict[str, int] | None = None
    #: (probe id, since when) of the probe a view first showed out: what `probe_since` says.
    probe_seen: tuple[object, float] | None = None
    #: `enforce` or `shadow`, as the call path reads it (`modes.effective`): the
    #: configuration's value for the key (`configured`), unless an operator's write (`chosen`:
    #: the mode, and the configuration's value when it was written) still stands.
    mode: str = "enforce"
    configured: str = "enforce"
    chosen: tuple[str, str] | None = None

    @property
    def lock(self) -> threading.RLock:
        """The key's lock; re-entrant: a scheduler may run `poll` at once, from inside a call
        on this key."""
        lock = self.made_lock
        if lock is None:
            with _MAKING:
                lock = self.made_lock
                if lock is None:
                    lock = self.made_lock = threading.RLock()
        return lock

    def quiet(self, agent_policy: bool) -> bool:
        """Whether a success here changes nothing: closed, nothing counted, and the credential
        known to work (under `agent` a key has none to learn of)."""
        breaker = self.breaker
        return (
            breaker.state is _CLOSED
            and breaker.count == 0
            and (agent_policy or self.credential_worked_at is not None)
        )

    def cooling(self, now: float) -> Admission | None:
        """The refusal a breaker in its cooldown makes alone (no lock, no line), counted; None
        when the call needs the breaker's decision."""
        refusal = self.breaker.cooling(now)
        if refusal is not None:
            self.count_denied(refusal.reason)
        return refusal

    def count_denied(self, reason: DenyReason | None) -> None:
        denied = self.denied
        if denied is None:
            denied = self.denied = {}
        denied[reason] = denied.get(reason, 0) + 1

    def count(self, name: str) -> None:
        tally = self.tally
        if tally is None:
            tally = self.tally = {}
        tally[name] = tally.get(name, 0) + 1


class KeyTable:
    """Every key's slot. No thread holds two keys' locks except `all_held`, in key order."""

    def __init__(self, policy: AgentPolicy | ToolPolicy, mode: str = "enforce") -> None:
        self.policy = policy
        #: The configuration's mode for a key it names nothing for (`Engine(mode=...)`).
        self.mode = mode
        self.slots: dict[str, Slot] = {}
        self._lock = threading.Lock()  # the table itself, taken alone or innermost
        #: One tuple per agent for the keys it alone calls: under `tool` an agent calls many
        #: backends, and its keys share the one tuple naming it.
        self._alone: dict[str, tuple[str, ...]] = {}

    def __len__(self) -> int:
        return len(self.slots)

    def get(self, key: str) -> Slot | None:
        return self.slots.get(key)

    def slot(self, key: str, agent: str | None) -> Slot:
        """The key's slot, made on first use, with `agent` among its callers."""
        with self._lock:
            slot = self.slots.get(key)
            if slot is None:
                mode = self.mode
                slot = self.slots[key] = Slot(Breaker(key, self.policy), mode=mode, configured=mode)
            if agent is not None and agent not in slot.agents:
                if slot.agents or agent == key:
                    slot.agents = (*slot.agents, agent)
                else:
                    slot.agents = self._alone.setdefault(agent, (agent,))
            return slot

    def known(self, key: str) -> Slot:
        slot = self.slots.get(key)
        if slot is None:
            known = sorted(self.slots)
            shown = ", ".join(known[:10]) or "none yet"
            more = f" and {len(known) - 10} more" if len(known) > 10 else ""
            raise UnknownKey(f"no breaker with key {key!r} (known: {shown}{more})")
        return slot

    def names(self) -> list[str]:
        with self._lock:
            return list(self.slots)

    def every(self) -> list[Slot]:
        with self._lock:
            return list(self.slots.values())

    @contextlib.contextmanager
    def all_held(self) -> Iterator[list[tuple[str, Slot]]]:
        """Every key's lock, in key order: nothing is half-written while they are held."""
        with self._lock:
            slots = sorted(self.slots.items())
        with contextlib.ExitStack() as held:
            for _, slot in slots:
                held.enter_context(slot.lock)
            yield slots
