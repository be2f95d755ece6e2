"""The pulse (`p`): every context in one row of numbers, plain data the pulse screen draws.

A row counts breakers by the words their cards show, through the console's one state table
(`console.states`) and the board's own summary, so the header, the tabs and the pulse never
disagree; HELD is asked for by name and counts from the day the engine's views can say it.
SHADOW is a mode, not a state (a shadow breaker is also open or closed), read through
`states.mode_of`.
"""

from __future__ import annotations

from dataclasses import dataclass

from breakerdeck.console.states import HELD, SHADOW, mode_of, word_for
from breakerdeck.console.tab import Tab

#: The pulse's breaker columns, in DESIGN's order: (engine name, whether it is a mode).
COLUMNS: tuple[tuple[str, bool], ...] = (
    ("open", False),
    ("half_open", False),
    (HELD, False),
    (SHADOW, True),
    ("paused", False),
)


def column_word(name: str, mode: bool) -> str:
    """A column's heading: the state's (or the mode's) word, lower case as table headings are."""
    return name if mode else word_for(name).lower()


@dataclass(frozen=True, slots=True)
class PulseRow:
    """One context as the pulse shows it."""

    number: int  # its tab's number (1 for the first)
    name: str
    color: str | None
    read_only: bool
    #: Since when its numbers are not live (on its header's clock); None while they are.
    stale_since: float | None
    #: Breakers per `COLUMNS` entry, in that order.
    counts: tuple[int, ...]
    refused_per_minute: int
    #: The open breaker whose countdown ends first: (seconds left, its key); None if none.
    next_end: tuple[float, str] | None
    #: Where it reads from: its feeds' URLs (or the source's label).
    where: str


@dataclass(frozen=True, slots=True)
class TabTitle:
    """A tab as its bar (and the header, for the one shown) names it."""

    number: int
    name: str
    color: str | None
    read_only: bool
    stale: bool
    active: bool
    open: int
    held: int


def tab_title(number: int, tab: Tab, active: bool) -> TabTitle:
    summary = tab.board.summary()
    return TabTitle(
        number=number,
        name=tab.name or tab.source.label,
        color=tab.context.color if tab.context is not None else None,
        read_only=tab.read_only,
        stale=tab.source.stale_since is not None,
        active=active,
        open=summary.count(word_for("open")),
        held=summary.count(word_for(HELD)),
    )


def pulse_row(number: int, tab: Tab) -> PulseRow:
    board, fleet = tab.board, tab.fleet
    summary = board.summary()
    counts = tuple(
        sum(mode_of(view) == name for view in board.views())
        if mode
        else summary.count(word_for(name))
        for name, mode in COLUMNS
    )
    ends = [
        (left, fleet.describe(card.id)[0])
        for card in board.cards()
        if (left := card.seconds_left(fleet.now_for(card.id))) is not None
    ]
    context = tab.context
    return PulseRow(
        number=number,
        name=tab.name or tab.source.label,
        color=context.color if context is not None else None,
        read_only=tab.read_only,
        stale_since=tab.source.stale_since,
        counts=counts,
        refused_per_minute=tab.board.refusals.per_minute(tab.source.now()),
        next_end=min(ends) if ends else None,
        where=", ".join(context.urls) if context is not None else tab.source.label,
    )
