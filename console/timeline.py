"""A breaker's state over time as a strip of cells, readable without colour.

The points are what the engine said: the state on each view it sent (and, for history read
back from the audit log before this console attached, the state a transition names). Nothing
here runs a state machine: a cell shows the state that held longest in its slice of time, or a
mark (a probe's outcome, a reset, a page) that happened in it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from breakerdeck.console.states import BY_NAME, STATES
from breakerdeck.engine import events as ev

#: (wall, state): the state from that moment on, a `console.states` name.
Point = tuple[float, str]
#: (wall, kind): something that happened at that moment. Kinds: see `MARK_GLYPHS`.
Mark = tuple[float, str]

#: Before the first point nothing is known (each state's glyph is in `console.states`).
UNKNOWN = " "
#: Marks, strongest first: one that happened in a cell is drawn instead of the state.
MARK_GLYPHS = {"page": "!", "reset": "R", "probe_failed": "✗", "probe_ok": "✓"}
_MARK_RANK = {kind: rank for rank, kind in enumerate(MARK_GLYPHS)}

#: The words a legend uses for each glyph: the states', then the marks'.
LEGEND = (
    *((look.glyph, look.css) for look in STATES),
    ("✗", "probe failed"),
    ("✓", "probe ok"),
    ("R", "reset"),
    ("!", "paged"),
)

#: The state a transition leads to: how history read back without views is placed.
TRANSITION_STATE = {
    ev.TRIPPED: "open",
    ev.REOPENED: "open",
    ev.HALF_OPEN: "half_open",
    ev.RECOVERED: "closed",
    ev.RESET: "closed",
    ev.HELD: "held",
}

#: A card's strip: one cell per half minute.
CARD_STEP = 30.0


@dataclass(frozen=True, slots=True)
class Cell:
    glyph: str
    #: The state or mark it shows ("unknown" before the first point), for its style.
    kind: str


def strip(
    points: Sequence[Point],
    marks: Iterable[Mark],
    *,
    start: float,
    step: float,
    count: int,
    now: float | None = None,
) -> list[Cell]:
    """`count` cells of `step` seconds from `start`: each the state that held longest in it
    (a point holds until the next), or the strongest mark in it. The cell under way at `now`
    shows the state now (a breaker that just tripped reads open at once)."""
    horizon = start + step * count
    end = horizon if now is None else min(horizon, now)
    cells: list[Cell] = []
    held: dict[int, dict[str, float]] = {}
    for n, (wall, state) in enumerate(points):
        until = points[n + 1][0] if n + 1 < len(points) else end
        a, b = max(wall, start), min(until, end)
        if b <= a:
            continue
        first, last = int((a - start) // step), min(count - 1, int((b - start) // step))
        for i in range(first, last + 1):
            lo, hi = max(a, start + i * step), min(b, start + (i + 1) * step)
            if hi > lo or (hi == lo and wall == lo):
                totals = held.setdefault(i, {})
                totals[state] = totals.get(state, 0.0) + (hi - lo)
    strongest: dict[int, str] = {}
    for wall, kind in marks:
        if not start <= wall < horizon:
            continue
        i = int((wall - start) // step)
        if i not in strongest or _MARK_RANK[kind] < _MARK_RANK[strongest[i]]:
            strongest[i] = kind
    if now is not None and points and start <= now < horizon:
        current = next((state for wall, state in reversed(points) if wall <= now), None)
        if current is not None:
            held[int((now - start) // step)] = {current: float("inf")}
    for i in range(count):
        if i in strongest:
            cells.append(Cell(MARK_GLYPHS[strongest[i]], strongest[i]))
        elif i in held:
            # The longest-held state; ties go to the worse one (open before closed).
            state = max(held[i], key=lambda s: (held[i][s], -BY_NAME[s].trouble))
            cells.append(Cell(BY_NAME[state].glyph, state))
        else:
            cells.append(Cell(UNKNOWN, "unknown"))
    return cells


def span_text(seconds: float) -> str:
    """`90s`, `12m`, `1h30m`, `2d`: a window's span, as its label says it."""
    whole = round(seconds)
    if whole < 120:
        return f"{whole}s"
    if whole < 7200:
        minutes = whole // 60
        return f"{minutes}m" if minutes < 120 else f"{minutes // 60}h"
    hours = whole // 3600
    if hours < 48:
        rest = whole % 3600 // 60
        return f"{hours}h{rest:02d}m" if rest else f"{hours}h"
    return f"{hours // 24}d"


def busy(points: Sequence[Point], marks: Sequence[Mark], since: float) -> bool:
    """Whether anything but `closed` shows after `since`: a healthy card draws no strip."""
    if any(wall >= since for wall, _ in marks):
        return True
    for n, (_wall, state) in enumerate(points):
        until = points[n + 1][0] if n + 1 < len(points) else float("inf")
        if state != "closed" and until > since:
            return True
    return False


def episode(points: Sequence[Point], now: float) -> tuple[float, float] | None:
    """The breaker's last open episode, (from, to): from its last trip (closed to anything
    else) to when it closed again, or to `now` while it lasts. None if it never left closed."""
    start = end = None
    for n, (wall, state) in enumerate(points):
        before = points[n - 1][1] if n else "closed"
        if state != "closed" and before == "closed":
            start, end = wall, None
        elif state == "closed" and before != "closed" and start is not None:
            end = wall
    if start is None:
        return None
    return start, now if end is None else end


#: Cell sizes a detail timeline picks from: the smallest that fits the episode in its width.
NICE_STEPS = (1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)


def fit_step(span: float, cells: int) -> float:
    """The smallest nice cell size that shows `span` seconds in at most `cells` cells."""
    return float(next((step for step in NICE_STEPS if step * cells >= span), NICE_STEPS[-1]))
