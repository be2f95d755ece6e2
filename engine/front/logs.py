"""The front doors' log: warnings and errors on standard error, one line each, each kind at
most once per 10 s; and one line per transition, reset and page of the process's breakers.

A door's log is read by people during an incident, and an incident is when the same thing
fails thousands of times: an upstream that speaks garbage logged a traceback per line it sent,
and a full disk logged one sentence 2,500 times in 55 s. Each record is one escaped line, and
the handler's repeat filter lets a kind through once per interval, the next line saying how
many were suppressed.
"""

from __future__ import annotations

import copy
import logging
import sys

from breakerdeck.engine import events as ev
from breakerdeck.engine.events import Event, Held, ModeChanged, Released, Transition, iso_utc
from breakerdeck.engine.feed.repeats import RepeatFilter
from breakerdeck.engine.text import printable


class OneLine(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        # A copy: the record is shared with every other handler, which keeps its traceback.
        line = copy.copy(record)
        line.exc_info = line.exc_text = line.stack_info = None
        return printable(super().format(line))[:500]


def setup(door: str, interval: float = 10.0) -> logging.Handler:
    """Route the process's warnings to standard error as `breakerdeck <door>: …` lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLine(f"breakerdeck {door}: %(name)s: %(message)s"))
    handler.addFilter(RepeatFilter(interval=interval))
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)
    return handler


#: The breakers' own lines (`tripped research-bot: upstream ×5, open 300 s`): always said, at
#: INFO, whatever the process's level for everything else.
breakers = logging.getLogger("breakerdeck.breakers")
breakers.setLevel(logging.INFO)

#: What an on-call engineer reads in the log: each transition, reset and page. A verdict
#: restored at start is not a transition; another replica's moves are its own log's.
_SAID = (ev.TRANSITIONS | {ev.CREDENTIAL_REVOKED, ev.CREDENTIAL_RESTORED}) - {ev.RESTORED}


def say_transitions(event: Event) -> None:
    """An engine listener: one line per transition, reset and page of this process."""
    if event.type in _SAID and not event.relayed:
        breakers.info(transition_line(event))


def transition_line(event: Event) -> str:
    """The line's words: what happened to which key, and what it means for calls now; a shadow
    breaker's move says that calls still go through, so nobody reads it as an outage (a move
    into shadow says so in its own words)."""
    line = _what_happened(event)
    if isinstance(event, Transition) and event.shadow and event.type != ev.MODE:
        return f"{line} (shadow: calls still go through)"
    return line


def _what_happened(event: Event) -> str:
    key, fields, kind = event.key, event.fields, event.type
    cooldown = fields.get("cooldown_seconds")
    if kind == ev.TRIPPED:
        failure = str(fields.get("failure_class", "failure")).removesuffix("_failure")
        return f"tripped {key}: {failure} ×{fields.get('count')}, open {cooldown:g} s"
    if kind == ev.REOPENED:
        return f"reopened {key}: the probe failed, open {cooldown:g} s"
    if kind == ev.HALF_OPEN:
        return f"half-open {key}: one probe may go"
    if kind == ev.RECOVERED:
        return f"recovered {key}: the probe succeeded, closed"
    if kind == ev.RESET:
        return f"reset {key} by {fields.get('actor')}: {_reason(fields)}"
    if kind == ev.PAGE:
        return f"paged {key}: open through two cooldowns"
    if kind == ev.CREDENTIAL_REVOKED:
        return f"paused {key}: its credential was revoked"
    if kind == ev.CREDENTIAL_RESTORED:
        return f"resumed {key}: its credential restored by {fields.get('actor')}"
    if isinstance(event, Held):
        until = iso_utc(event.until)
        return f"held {key} by {event.actor} until {until}, every call refused: {event.reason}"
    if isinstance(event, Released):
        if event.actor == "expiry":
            return f"released {key}: its hold ran out"
        return f"released {key} by {event.actor}"
    if isinstance(event, ModeChanged):
        return f"{event.to} {key} by {event.actor} (was {event.from_}): {_reason(fields)}"
    raise ValueError(f"no log line for {kind!r}")


def _reason(fields: dict[str, object]) -> object:
    return fields.get("reason") or "no reason given"
