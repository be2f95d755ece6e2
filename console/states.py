"""The console's breaker states, one row each: the word that says it (so every screen reads
without colour), its colour, its timeline glyph and where it sorts.

Every screen reads this table and none keeps its own: a new state (DESIGN's HELD was) is one
more row here, and cards, the table view, the summary bar, the event log, timelines, the help,
`status` and the stylesheet's classes follow.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StateLook:
    #: The engine's name for it (a view's `state`; `paused` is the view's flag).
    name: str
    #: The word on cards, the table view, the summary bar and `status`.
    word: str
    #: Its timeline cell, distinct from every other glyph.
    glyph: str
    #: The stylesheet's colour for it (cards and the event log, `cards--<css>`, `log--<css>`).
    colour: str
    #: Rich styles where no stylesheet reaches: its word (table view, summary bar) and its
    #: timeline cells on the detail screen.
    label: str
    cell: str
    #: Where it sorts, most troubled first: cards, the summary bar, a timeline cell's tie.
    trouble: int
    #: Where it sorts in `status` and in a key's "open on 3 of 5" line (a revoked credential
    #: outlasts any cooldown, so it comes first).
    listed: int
    #: Counted in the summary bar while no breaker is in it: the states a breaker reaches by
    #: itself are; an operator's hold, only while there is one (at 80 columns a standing
    #: `HELD 0` cost the clock its room).
    shown_at_zero: bool = True

    @property
    def css(self) -> str:
        """`half-open`: its component classes' suffix, and how the filter and legend say it."""
        return self.word.lower()

    @property
    def loud(self) -> bool:
        """Trouble: drawn reversed where there is no colour, the loudest thing on screen."""
        return self.name != "closed"


#: In the order a legend reads them.
STATES = (
    StateLook("closed", "CLOSED", "·", "$success", "green", "green", trouble=4, listed=4),
    StateLook("open", "OPEN", "█", "$error", "bold red", "bold red", trouble=0, listed=1),
    StateLook("half_open", "HALF-OPEN", "▒", "$warning", "bold yellow", "yellow", 1, 2),
    StateLook("paused", "PAUSED", "‖", "$accent", "bold magenta", "magenta", trouble=2, listed=0),
    # An operator's hold: deliberate, so after what broke by itself; it refuses every call.
    StateLook("held", "HELD", "≡", "$secondary", "bold blue", "blue", 3, 3, shown_at_zero=False),
)

BY_NAME = {look.name: look for look in STATES}
BY_WORD = {look.word: look for look in STATES}
CLOSED = BY_NAME["closed"]
#: Most troubled first.
BY_TROUBLE = tuple(sorted(STATES, key=lambda look: look.trouble))
#: The words in the order `status` and a key's aggregate line list them.
LISTED_WORDS = tuple(look.word for look in sorted(STATES, key=lambda look: look.listed))


#: DESIGN's fifth state (issue 32: an operator's hold), which the engine's views cannot say yet.
#: What counts it (tab titles, the pulse) asks for it by name through `word_for` and
#: `Summary.count`: it reads 0 until its row joins STATES, and counts from that day on.
HELD = "held"
#: A breaker's modes (DESIGN, "shadow / enforce"); the console shows SHADOW beside the state.
ENFORCE, SHADOW = "enforce", "shadow"
MODE_WORDS = {SHADOW: "SHADOW"}


def word_for(name: str) -> str:
    """The word for a state by its engine name, also for one this table has no row for yet."""
    look = BY_NAME.get(name)
    return look.word if look is not None else name.upper().replace("_", "-")


def mode_of(view: object) -> str:
    """A breaker's mode: `enforce` for a view that carries none (the engine's views carry a
    `mode` from issue 32 on; until then every breaker enforces)."""
    mode = getattr(view, "mode", None)
    return mode if isinstance(mode, str) else ENFORCE


def look_of(state: str, paused: bool = False) -> StateLook:
    """How a view's state shows: a revoked credential's PAUSED whatever its breaker's state;
    a state this console does not know yet (a newer engine's) as CLOSED rather than a crash."""
    if paused:
        return BY_NAME["paused"]
    return BY_NAME.get(state, CLOSED)


def component_classes(prefix: str) -> set[str]:
    """`cards--open`, `cards--half-open`, …: a widget's classes for every state."""
    return {f"{prefix}--{look.css}" for look in STATES}


def state_css(widget: str, prefix: str, *, reversed_without_colour: bool = False) -> str:
    """The stylesheet rules for a widget's state classes, each in its colour; with
    `reversed_without_colour`, under NO_COLOR (where every colour turns grey, and red on dark
    grey is the faintest grey of all) trouble is drawn reversed in the brightest grey."""
    rules = [f"{widget} > .{prefix}--{look.css} {{ color: {look.colour}; }}" for look in STATES]
    if reversed_without_colour:
        loud = ", ".join(f"{widget}:nocolor > .{prefix}--{s.css}" for s in STATES if s.loud)
        rules.append(
            f"{loud} {{ color: $foreground; background: $background; text-style: bold reverse; }}"
        )
    return "\n".join(rules)
