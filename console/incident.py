"""One breaker's incident as a document, Markdown and JSON: what `e` exports from a console and
`breakerdeck export` prints, made by this one piece of code from a card and the audit rows its
source holds.

The document carries the card (state, countdown, counter against its thresholds, cause, hint),
its timeline over the episode, its trips, its last denied calls, the audit rows of the episode
(marked partial when the source does not hold the episode from its trip, or from the hold
that began it: a console that attached mid-episode, or an episode longer than the rows read)
and the command line that ends it: `breakerdeck release` for a held breaker, `breakerdeck reset`
for another one not closed. A hold says who took it, why and until when; a shadow breaker
says SHADOW beside its state. Never a token: nothing here reads one.

Everything from outside (keys, agents, actors, reasons, platforms) is made printable first
(`engine.text.printable`: no control character reaches a terminal that shows the file), then
escaped for Markdown, so a key cannot open a link, an HTML tag or a code block; the command
line quotes the key for a POSIX shell, a control character as bash's `$'\\x1b'`. JSON escapes
by itself (ASCII only, so no bidi override survives either).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from breakerdeck.console.card import Card, Thresholds
from breakerdeck.console.hint import hint
from breakerdeck.console.log_rows import describe, short_type
from breakerdeck.console.states import mode_of
from breakerdeck.console.timeline import LEGEND, episode, fit_step, strip
from breakerdeck.console.words import clock_text, mmss
from breakerdeck.engine import events as ev
from breakerdeck.engine.events import Event, record
from breakerdeck.engine.state import State
from breakerdeck.engine.text import printable

#: Audit rows read for an export: the episode's are kept from these.
EXPORT_ROWS = 2000
#: The timeline's cells across the Markdown's code block.
TIMELINE_CELLS = 72
#: Written where the engine's feed is not known (an in-process demo, a recording).
NO_URL = "ws://HOST:PORT"


@dataclass(frozen=True, slots=True)
class Incident:
    card: Card
    limits: Thresholds
    #: The source's clock when exported (the countdown's), and the real time of the export.
    now: float
    exported_at: float
    #: The episode's audit rows the source holds, newest first.
    rows: tuple[Event, ...]
    #: Why `rows` are not the whole episode (None: they are).
    partial: str | None
    #: Where the console's numbers come from: its header's label, and the feed a shell reaches.
    source: str
    url: str | None
    approximate: bool = False

    @property
    def commands(self) -> list[str]:
        """The shell's lines for this breaker (never with a token: `--token-file` is the
        reader's to add). A held one's is `release` (it half-opens, the next call the probe):
        a reset would end the hold too, but let every call through at once."""
        if self.card.state == State.CLOSED and not self.card.view.paused:
            return []
        verb = "release" if self.card.state == State.HELD else "reset"
        target = f"{self.url or NO_URL} {shell_word(self.card.key)}"
        return [f"breakerdeck {verb} {target} --reason 'after the incident review'"]


def incident(
    card: Card,
    rows: list[Event],
    *,
    limits: Thresholds,
    now: float,
    exported_at: float,
    source: str,
    url: str | None,
    note: str | None = None,
    approximate: bool = False,
) -> Incident:
    """The incident of `card`'s last episode: `rows` are the source's audit rows for it, newest
    first; `note`: what the source says of its rows (a feed's: since it connected)."""
    kept, partial = episode_rows(card, rows)
    if partial and note:
        partial = f"{partial} {note}"
    return Incident(card, limits, now, exported_at, tuple(kept), partial, source, url, approximate)


def episode_rows(card: Card, rows: list[Event]) -> tuple[list[Event], str | None]:
    """The rows of the card's last episode (from its trip to its end, or now; from the hold
    that began it when no trip is under way), and why they are partial if they are."""
    trip = card.trips[0] if card.trips else None
    if card.state != State.CLOSED and (trip is None or trip.ended is not None):
        return _since_hold(card, rows)
    if trip is None:
        return [], None
    kept = [
        row
        for row in rows
        if row.wall >= trip.wall and (trip.ended_wall is None or row.wall <= trip.ended_wall)
    ]
    if any(row.seq == trip.seq and row.type in (ev.TRIPPED, ev.RESTORED) for row in rows):
        return kept, None
    since = f"from {clock_text(kept[-1].wall)} on" if kept else "none of it"
    return kept, (
        f"Partial: the episode began {clock_text(trip.wall)}; the rows held here are {since}."
    )


def _since_hold(card: Card, rows: list[Event]) -> tuple[list[Event], str | None]:
    """Not closed with no trip under way: an operator's hold began the episode (a breaker held
    while closed, or released from such a hold into half-open)."""
    began = next((n for n, row in enumerate(rows) if row.type == ev.HELD), None)
    if began is not None:
        return rows[: began + 1], None
    if card.state == State.HELD:
        return list(rows), "Partial: this console never saw the hold begin."
    return list(rows), "Partial: this console never saw the trip that opened it."


# -- Markdown ---------------------------------------------------------------------------------

#: What Markdown (CommonMark, GFM tables) reads as markup inside a line.
_MARKUP = re.compile(r"([\\`*_\[\]<>|~&#!])")


def md(text: object) -> str:
    """Outside text as Markdown shows it: printable, every markup character escaped."""
    return _MARKUP.sub(r"\\\1", printable(str(text)))


def shell_word(text: str) -> str:
    """`text` as one word of a POSIX shell line: single-quoted where it needs quoting; with a
    control character (or a bidi override) as bash's `$'…'`, every such character escaped."""
    if printable(text) == text:
        return shlex.quote(text)
    escaped = printable(text.replace("\\", "\\\\").replace("'", "\\'"))
    return f"$'{escaped}'"


def _fence(body: str) -> str:
    """A code block fence longer than any run of backticks in `body`."""
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    return "`" * max(3, longest + 1)


def markdown(incident: Incident) -> str:
    card = incident.card
    lines = [f"# Incident: {md(card.key)} ({card.state_words()})", ""]
    lines += [f"- **{name}**: {value}" for name, value in _facts(incident)]
    lines += ["", "## Timeline", ""]
    lines += _timeline_lines(incident)
    lines += ["", "## Trips (newest first)", ""]
    lines += [f"- {md(trip.short)}" for trip in card.trips] or ["- none this console saw"]
    lines += ["", f"## Last denied calls ({card.denied_total} this episode)", ""]
    lines += [f"- {md(denied.text)}" for denied in card.denied] or ["- none"]
    lines += ["", f"## Audit rows of this episode ({len(incident.rows)}, newest first)", ""]
    if incident.partial:
        lines += [f"> {md(incident.partial)}", ""]
    if incident.rows:
        lines += ["| seq | time | event | agent | details |", "| --- " * 5 + "|"]
        lines += [
            f"| {row.seq} | {clock_text(row.wall)} | {md(short_type(row.type))} "
            f"| {md(row.agent or '')} | {md(describe(row))} |"
            for row in incident.rows
        ]
    else:
        lines.append("none held here")
    commands = incident.commands
    if commands:
        block = "\n".join(commands)
        fence = _fence(block)
        lines += ["", "## Commands", "", f"{fence}sh", block, fence]
        if incident.url is None:
            lines += ["", f"`{NO_URL}`: the engine's feed (this console's engine has none)."]
    return "\n".join(lines) + "\n"


def _facts(incident: Incident) -> list[tuple[str, str]]:
    card, view = incident.card, incident.card.view
    state = card.state_words()
    left = card.seconds_left(incident.now)
    if left is not None:
        state += f", probe in {mmss(left)} (cooldown {view.cooldown:g} s)"
    held_left = card.hold_left(incident.now)
    if held_left is not None:
        state += f", {mmss(held_left)} left"
    if card.rank == 0:
        state += ", PAGED"
    facts = [
        ("agent", md(card.agent)),
        ("key", md(card.key)),
        ("state", state),
    ]
    if view.state == State.HELD:  # who, until when and why, as the held card says them
        facts += [
            ("held by", md(view.held_by or "?")),
            ("until", _iso(view.held_until) if view.held_until is not None else "?"),
            ("why", md(view.held_reason or "no reason given")),
        ]
    facts.append(("counter", incident.limits.counter(view.count, approximate=incident.approximate)))
    if card.shown_cause is not None:
        facts.append(("cause", md(card.shown_cause)))
    if card.platform:
        facts.append(("platform", md(card.platform)))
    if card.shared:
        facts.append(("shared by", md(", ".join(view.agents))))
    facts += [
        ("hint", md(hint(card))),
        ("source", md(incident.source) + (f" ({md(card.source)})" if card.source else "")),
        ("as of", f"{_iso(incident.now)} (the source's clock)"),
        ("exported", _iso(incident.exported_at)),
    ]
    return facts


def _timeline_lines(incident: Incident) -> list[str]:
    card = incident.card
    shown = episode(card.timeline, incident.now)
    if shown is None:
        return ["never left closed while this console watched"]
    first, last = shown
    step = fit_step(last - first, TIMELINE_CELLS - 2)
    start = first - step  # a cell of what came before
    count = min(TIMELINE_CELLS, int((last - start) // step) + 2)
    cells = strip(card.timeline, card.marks, start=start, step=step, count=count, now=incident.now)
    legend = "  ".join(f"{glyph} {word}" for glyph, word in LEGEND)
    changes = [f"- {clock_text(wall)} {state.replace('_', '-')}" for wall, state in card.timeline]
    return [
        f"{clock_text(first)} to {clock_text(last)}, a cell is {step:g} s ({legend}):",
        "",
        "```",
        "".join(cell.glyph for cell in cells),
        "```",
        "",
        *changes,
    ]


def _iso(wall: float) -> str:
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


# -- JSON -------------------------------------------------------------------------------------


def as_json(incident: Incident) -> str:
    card, view = incident.card, incident.card.view
    document: dict[str, Any] = {
        "key": card.key,
        "agent": card.agent,
        "agents": list(view.agents),
        "source": incident.source,
        "engine": card.source,
        "state": card.word,
        "mode": mode_of(view),
        "hold": _hold(card, incident.now),
        "paged": card.rank == 0,
        "seconds_left": card.seconds_left(incident.now),
        "cooldown_seconds": view.cooldown,
        "count": view.count,
        "count_approximate": incident.approximate,
        "thresholds": _thresholds(incident.limits),
        "cause": view.trip_cause,
        "platform": card.platform,
        "hint": hint(card),
        "as_of": _iso(incident.now),
        "exported_at": _iso(incident.exported_at),
        "timeline": [{"t": wall, "state": state} for wall, state in card.timeline],
        "marks": [{"t": wall, "mark": mark} for wall, mark in card.marks],
        "trips": [
            {
                "seq": trip.seq,
                "t": trip.wall,
                "cause": trip.cause,
                "count": trip.count,
                "failed_probes": trip.reopened,
                "paged": trip.paged,
                "ended": trip.ended,
                "ended_t": trip.ended_wall,
                "actor": trip.actor,
                "reason": trip.reason,
            }
            for trip in card.trips
        ],
        "denied_this_episode": card.denied_total,
        "denied": [
            {"t": d.wall, "platform": d.platform, "reason": d.reason, "agent": d.agent}
            for d in card.denied
        ],
        "audit": {
            "rows": [record(row, 0.0) for row in incident.rows],
            "partial": incident.partial is not None,
            "note": incident.partial,
        },
        "commands": incident.commands,
    }
    return json.dumps(document, indent=2) + "\n"


def _hold(card: Card, now: float) -> dict[str, Any] | None:
    view = card.view
    if view.state != State.HELD:
        return None
    return {
        "by": view.held_by,
        "reason": view.held_reason,
        "until": _iso(view.held_until) if view.held_until is not None else None,
        "seconds_left": card.hold_left(now),
    }


def _thresholds(limits: Thresholds) -> dict[str, int]:
    if limits.kind == "agent":
        return {"auth": limits.auth, "upstream": limits.upstream}
    return {"failure": limits.failure}
