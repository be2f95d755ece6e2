"""The event log's rows: which events it shows, in what words, and what its filter reads."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime

from breakerdeck.console.card import Failure
from breakerdeck.console.states import BY_NAME
from breakerdeck.console.words import cause_word, clock_text
from breakerdeck.engine import events as ev
from breakerdeck.engine.events import BreakerView, Event

#: Rows the event log keeps, newest first (transitions, probes, resets, pages).
LOG_ROWS = 1000

#: An event's word in the log (distinct words: it reads without colour) and the state after
#: (a `console.states` name: its colour).
LOG_KINDS = {
    ev.TRIPPED: ("TRIP", "open"),
    ev.HALF_OPEN: ("HALF", "half_open"),
    ev.REOPENED: ("REOPEN", "open"),
    ev.RECOVERED: ("RECOVER", "closed"),
    ev.RESET: ("RESET", "closed"),
    ev.PAGE: ("PAGE", "open"),
    ev.RESTORED: ("RESTORE", None),
    ev.CREDENTIAL_REVOKED: ("REVOKED", "paused"),
    ev.CREDENTIAL_RESTORED: ("FIXED", None),
    ev.HELD: ("HOLD", "held"),
    ev.RELEASED: ("RELEASE", None),  # its HALF (or RESET) line follows
    ev.MODE: ("MODE", None),
}


@dataclass(frozen=True, slots=True)
class LogRow:
    """One line of the event log: a transition, a probe going out or coming back, a reset
    (with who), a page, a credential revoked or marked fixed."""

    seq: int
    wall: float
    ident: str  # the source's id for the breaker
    name: str  # as its card names it: the agent, or under `tool` the key
    #: TRIP, HALF, PROBE, REOPEN, RECOVER, RESET, PAGE, RESTORE, REVOKED, FIXED, HOLD,
    #: RELEASE, MODE
    kind: str
    text: str
    state: str | None  # the state it led to (what a state word in the filter matches)
    haystack: str = ""  # what the filter's bare words are looked for in
    #: What the filter's `agent:`, `key:` and `platform:` terms read.
    agent: str | None = None
    key: str | None = None
    platform: str | None = None

    # What a filter reads (`console.filters`): the cards' filter keeps its rows too.

    @property
    def filter_state(self) -> str | None:
        look = BY_NAME.get(self.state or "")
        return None if look is None else look.css

    def filter_field(self, name: str) -> str | None:
        return {"agent": self.agent, "key": self.key, "platform": self.platform}.get(name)

    @property
    def filter_text(self) -> str:
        return self.haystack

    @property
    def filter_flags(self) -> frozenset[str]:
        return frozenset()


CALL_KINDS = frozenset({ev.CALL_COMPLETED, ev.CALL_FAILED})


def log_row(
    event: Event, name: str, source: str | None, cause: Failure | None = None, key: str = ""
) -> LogRow | None:
    """The event log's line for an event, or None for one it does not show. `cause`: the
    counted failure a trip or a reopen came right after (its platform and fault); `key`: the
    breaker's key as its engine writes it (its id carries the source when several are
    watched)."""
    f = event.fields
    kind = event.type
    if kind in (ev.CALL_COMPLETED, ev.CALL_FAILED):
        if not f.get("probe") or f.get("counted") or f.get("outcome") in (None, "success"):
            return None  # a failed probe's REOPEN line says it, a good one's RECOVER
        text = f"probe back uncounted ({f.get('fault')}): the next call is the probe"
        word, state = "PROBE", None
    elif kind in LOG_KINDS:
        word, state = LOG_KINDS[kind]
        text = _log_text(event, cause)
    else:
        return None
    where = f" on {source}" if source else ""
    haystack = " ".join(
        str(part)
        for part in (
            name,
            event.key,
            event.agent,
            f.get("platform"),
            f.get("failure_class"),
            f.get("actor"),
            word,
            source,
        )
        if part
    ).lower()
    return LogRow(
        event.seq,
        event.wall,
        event.key,
        name,
        word,
        text + where,
        state,
        haystack,
        agent=event.agent,
        key=key,
        platform=f.get("platform") or (cause.platform if cause is not None else None),
    )


def probe_row(view: BreakerView, name: str, source: str | None, key: str = "") -> LogRow:
    """The log's line for a probe the engine's view says went out (no event says it)."""
    since = view.probe_since or 0.0
    where = f" on {source}" if source else ""
    haystack = f"{name} {view.key} probe {source or ''}".lower()
    agent = view.agents[0] if len(view.agents) == 1 else None
    text = f"a probe went out{where}"
    return LogRow(
        view.seq, since, view.key, name, "PROBE", text, None, haystack, agent=agent, key=key
    )


def _log_text(event: Event, cause: Failure | None) -> str:
    """The audit table's words, and for a trip or a failed probe what the failure was."""
    f = event.fields
    where = f" ({cause.platform} {cause.fault})" if cause is not None else ""
    if event.type == ev.TRIPPED:
        cooldown = f.get("cooldown_seconds") or 0
        counted = f"{cause_word(f.get('failure_class'))}×{f.get('count')}"
        return f"{counted}{where}, open {cooldown:g}s"
    if event.type == ev.REOPENED:
        return f"probe failed{where}, open {f.get('cooldown_seconds') or 0:g}s"
    if event.type == ev.CREDENTIAL_REVOKED:
        return "credential revoked: calls on it are refused"
    return describe(event)


def held_until(event: Event) -> float | None:
    """When a `circuit_breaker.held` line's hold runs out (wall): its view says so; an audit
    row keeps it as a UTC time; the engine's own event as a wall time."""
    if event.view is not None and event.view.held_until is not None:
        return event.view.held_until
    until = event.fields.get("until")
    if isinstance(until, str):
        with contextlib.suppress(ValueError):
            return datetime.fromisoformat(until.replace("Z", "+00:00")).timestamp()
    wall = getattr(event, "until", None)
    return wall if isinstance(wall, float | int) else None


def short_type(kind: str) -> str:
    """`tripped`, `reset`, `call.denied`: an event's type as the audit tables write it."""
    return "reset" if kind == ev.RESET else kind.removeprefix("circuit_breaker.")


_SHOWN_FIELDS = (
    "platform",
    "outcome",
    "fault",
    "agent_status",
    "refresh",
    "reason",
    "failure_class",
    "count",
    "cooldown_seconds",
    "retry_after_seconds",
    "actor",
    "state",
)


def describe(event: Event) -> str:
    """An event's own fields in a few words: the audit table's details, the event log's."""
    f = event.fields
    if event.type in (ev.CALL_FAILED, ev.CALL_COMPLETED):
        parts = [f.get("platform"), f.get("outcome"), f"fault {f.get('fault')}"]
        if f.get("agent_status") not in (None, f.get("outcome")):
            parts.append(f"→ {f['agent_status']}")
        if f.get("refresh"):
            parts.append(f"refresh {f['refresh']}")
        if f.get("probe"):
            parts.append("probe")
        if not f.get("counted"):
            parts.append("not counted")
        return " ".join(str(p) for p in parts if p)
    if event.type == ev.CALL_DENIED:
        retry = round(f.get("retry_after_seconds") or 0)
        return f"{f.get('platform')} {f.get('reason')} retry in {retry}s"
    if event.type == ev.TRIPPED:
        return f"{f.get('failure_class')} ×{f.get('count')}, open {f.get('cooldown_seconds'):g}s"
    if event.type == ev.REOPENED:
        return f"probe failed, open {f.get('cooldown_seconds'):g}s"
    if event.type == ev.PAGE:
        return "open through two cooldowns: on-call paged"
    if event.type == ev.HALF_OPEN:
        return "cooldown over: the next call is the probe"
    if event.type == ev.RECOVERED:
        return "a call succeeded: closed"
    if event.type == ev.RESET:
        return f"by {f.get('actor')}: {f.get('reason')}"
    if event.type == ev.CREDENTIAL_RESTORED:
        return f"marked fixed by {f.get('actor')}"
    if event.type == ev.HELD:
        until = held_until(event)
        return f"by {f.get('actor')} until {clock_text(until)}: {f.get('reason')}"
    if event.type == ev.RELEASED:
        if f.get("actor") == "expiry":
            return "the hold ran out: released"
        return f"by {f.get('actor')}"
    if event.type == ev.MODE:
        why = f": {f['reason']}" if f.get("reason") else ""
        return f"{f.get('from')} → {f.get('to')} by {f.get('actor')}{why}"
    shown = [f"{k}={f[k]}" for k in _SHOWN_FIELDS if k in f and f[k] is not None]
    return " ".join(shown)
