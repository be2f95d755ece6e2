"""What each line of a breaker card reads and how it is styled: the title with its state,
countdown and timeline strip, the body's counter, hint, denied calls and trips. `CardList`
(the list that scrolls, selects and lays the cards out) is built on `CardLines`."""

from __future__ import annotations

from collections.abc import Callable

from rich.segment import Segment
from rich.style import Style
from textual.scroll_view import ScrollView
from textual.strip import Strip

from breakerdeck.console.card import RANK_CLOSED, RANK_PAGED, Card, Thresholds
from breakerdeck.console.hint import hint
from breakerdeck.console.states import CLOSED, STATES
from breakerdeck.console.timeline import CARD_STEP, busy, span_text, strip
from breakerdeck.console.words import cause_word, clock_text
from breakerdeck.engine.state import State
from breakerdeck.engine.text import printable

TROUBLE_LINES = 5
CLOSED_LINES = 3
STATE_WIDTH = 11  # "HALF-OPEN", then two spaces
#: The title line's state timeline: after the name's room, ending before the right-hand room
#: (an open card's labelled countdown, `probe in 04:28`; others' `cooldown 300s`).
NAME_ROOM = 27  # "billing-assistant  PAGED " fits: strips of one width, card under card
COOLDOWN_ROOM = len("probe in 04:28")
#: A title line's last cells, where an open card's countdown is drawn: what the tick repaints.
COUNTDOWN_CELLS = COOLDOWN_ROOM + 4
MIN_STRIP = 8
MAX_STRIP = 96
#: The least a card's strip shows: a 300 s cooldown, its probe and some of what came before.
CARD_WINDOW = 15 * 60.0


def card_height(card: Card) -> int:
    """Five lines in trouble, three closed; one more on the card that carries its key's
    "open on 3 of 5" line (several sources)."""
    lines = CLOSED_LINES if card.rank == RANK_CLOSED else TROUBLE_LINES
    return lines + 1 if card.aggregate else lines


def ago(seconds: float) -> str:
    """`42s`, `3m05s`, `2h10m`: how long a source has been out of touch."""
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


class CardLines(ScrollView):
    """One card line drawn from the card's data; what it reads from the list is declared
    here and set by `CardList`."""

    thresholds: Thresholds
    approximate: bool
    now_for: Callable[[Card], float]
    #: Whether this console offers `f`, `r` and `O` on the card: its hint names only those.
    fix_key: Callable[[Card], bool]
    reset_key: Callable[[Card], bool]
    release_key: Callable[[Card], bool]

    def _draw(
        self,
        card: Card,
        line: int,
        width: int,
        selected: bool,
        countdown: str | None,
        stale: str | None = None,
        fixed: bool = False,
        slot: int | None = None,
    ) -> Strip:
        base = self.rich_style
        if selected:
            base = base + self.get_component_rich_style("cards--selected")
        dim = self.get_component_rich_style("cards--dim")
        state_style = self.get_component_rich_style(f"cards--{card.look.css}")
        segments: list[Segment]
        if card.aggregate:
            if line == 0:
                segments = [Segment("  "), Segment(printable(card.aggregate), Style(bold=True))]
                # Every segment gets the list's style: NO_COLOR's filter fails on one without.
                strip = Strip(segments).crop_extend(0, width - 1, self.rich_style)
                strip = strip.apply_style(self.rich_style)
                return Strip.join([strip, Strip.blank(1, self.rich_style)])
            line -= 1
        if line >= card_height(card) - (1 if card.aggregate else 0):
            segments = []
        elif line == 0:
            segments = self._title(card, selected, countdown, state_style, width - 1, stale, slot)
        else:
            gutter = "  ┃ " if selected else "  │ "
            room = width - 1 - len(gutter)
            # Every word in a body line may come from outside (keys, platforms, actors).
            body = self._body(card, line, dim, room, fixed)
            # the gutter in the state's colour, never reversed (NO_COLOR reverses the word)
            segments = [Segment(gutter, state_style + Style(reverse=False, bold=False))]
            segments += [Segment(printable(s.text), s.style) for s in body]
        strip = _fit(segments, width - 1, base).apply_style(base)
        return Strip.join([strip, Strip.blank(1, self.rich_style)])

    def _title(
        self,
        card: Card,
        selected: bool,
        countdown: str | None,
        state_style: Style,
        width: int,
        stale: str | None = None,
        slot: int | None = None,
    ) -> list[Segment]:
        kind = (card.limits or self.thresholds).kind
        name = card.agent if kind == "agent" else f"{card.agent} · {card.key}"
        name = printable(name)
        segments = [
            Segment("▶ " if selected else "  "),
            Segment(f"{card.state_words():<{STATE_WIDTH}}", state_style + Style(bold=True)),
            Segment(" "),
            Segment(name, self.get_component_rich_style("cards--name")),
        ]
        dim = self.get_component_rich_style("cards--dim")
        if card.source is not None:
            segments.append(Segment(f" on {printable(card.source)}", dim))
        if card.shared:
            segments.append(Segment(" shared", dim))
        if stale is not None:
            segments.append(Segment(" "))
            segments.append(Segment(stale, Style(bold=True, reverse=True)))
        if card.rank == RANK_PAGED:
            segments.append(Segment(" "))
            segments.append(Segment(" PAGED ", self.get_component_rich_style("cards--paged")))
        if countdown is not None:
            # What the time is (`OPEN 04:28` read as "open for 4m28s"): always shown, the
            # name cut for it if it must be; in the state's colour, never reversed.
            right = countdown_words(countdown, card.state)
            over = sum(segment.cell_length for segment in segments) - (width - len(right) - 2)
            if over > 0:  # the name gives way (never the state, PAGED or STALE)
                kept = max(1, len(name) - over - 1)
                segments[3] = Segment(name[:kept] + "…", segments[3].style)
            elif slot is not None:
                segments += self._timeline(card, slot, segments, width)
            used = sum(segment.cell_length for segment in segments)
            segments.append(Segment(" " * (width - used - len(right) - 1)))
            segments.append(Segment(right, state_style + Style(reverse=False, bold=True)))
            return segments
        if slot is not None:
            segments += self._timeline(card, slot, segments, width)
        if card.state != State.CLOSED:  # the cooldown this open episode runs, right-aligned
            used = sum(segment.cell_length for segment in segments)
            for right in (f"cooldown {card.view.cooldown:g}s", f"{card.view.cooldown:g}s"):
                if used + len(right) + 2 <= width:  # the short form where the long one is cut
                    segments.append(Segment(" " * (width - used - len(right) - 1)))
                    segments.append(Segment(right, dim))
                    break
        return segments

    def _timeline(self, card: Card, slot: int, before: list[Segment], width: int) -> list[Segment]:
        """The card's recent states as a strip, `-12m ·····███▒✗███`, ending where the
        cooldown's room begins (so strips line up card under card), from the name's room on;
        fewer cells where the name runs long, none under `MIN_STRIP`, and none on a closed card
        with nothing in its window."""
        used = sum(segment.cell_length for segment in before)
        end = width - COOLDOWN_ROOM - 2
        room = min(MAX_STRIP, end - (2 + STATE_WIDTH + 1 + NAME_ROOM) - 5)  # "-12m " first
        cells = min(room, end - used - 2 - 5)
        if cells < MIN_STRIP:
            return []
        step = strip_step(room)
        # the window ends with the cell under way (the half minute, or minute)
        until = (int(slot * CARD_STEP // step) + 1) * step
        since = until - cells * step
        if card.rank == RANK_CLOSED and not busy(card.timeline, card.marks, since):
            return []
        label = f"-{span_text(cells * step)}"
        segments = [Segment(" " * (end - used - cells - len(label) - 1))]
        segments.append(Segment(label + " ", self.get_component_rich_style("cards--dim")))
        segments += self.cells(card, since, step, cells)
        return segments

    def cells(self, card: Card, start: float, step: float, count: int) -> list[Segment]:
        """The timeline's cells from `start`, each in its state's colour. Never reversed:
        without colour a reversed block would read as a blank; the glyph says the state."""
        plain = Style(reverse=False, bold=False)
        mark = self.get_component_rich_style("cards--mark")
        styles = {
            look.name: self.get_component_rich_style(f"cards--{look.css}") + plain
            for look in STATES
        }
        styles["unknown"] = styles[CLOSED.name]
        now = self.now_for(card)
        cells = strip(card.timeline, card.marks, start=start, step=step, count=count, now=now)
        return [Segment(cell.glyph, styles.get(cell.kind, mark)) for cell in cells]

    def _body(
        self, card: Card, line: int, dim: Style, room: int, fixed: bool = False
    ) -> list[Segment]:
        view = card.view
        if line == 1:
            limits = card.limits or self.thresholds
            # ≈: replayed from an audit log, which keeps no successes (they reset it)
            counter = limits.counter(view.count, approximate=self.approximate)
            if card.rank == RANK_CLOSED:
                said = f"{counter} · {hint(card)}"
                return [
                    Segment(said if len(said) <= room else f"{counter} · {hint(card, short=True)}")
                ]
            if view.state == State.HELD:  # until when and why (as typed); the hint says who
                reason = view.held_reason or "no reason given"
                return [Segment(f"until {clock_text(view.held_until)} · why: “{reason}”")]
            # The longest line that fits: the probe's words must never be cut, and the cause
            # goes first where they need its room (the hint and the trips line say it too).
            cause = f"cause {cause_word(view.trip_cause)}"
            forms = probe_words(card) or [""]
            lines = [[counter, cause, f] for f in forms] + [[counter, f] for f in forms]
            shown = [" · ".join(part for part in parts if part) for parts in lines]
            return [Segment(next((said for said in shown if len(said) <= room), shown[-1]))]
        if card.rank == RANK_CLOSED:  # a closed card's last line: its trips
            return self._trips(card, dim, room)
        if line == 2:
            offers = {
                "fixable": self.fix_key(card),
                "resettable": self.reset_key(card),
                "releasable": self.release_key(card),
            }
            text = "→ " + hint(card, keys=True, fixed=fixed, **offers)
            return [Segment(text, self.get_component_rich_style("cards--hint"))]
        if line == 3:
            if not card.denied:
                return [Segment("denied ", dim), Segment("none yet", dim)]
            shown = _fitting([printable(d.text) for d in card.denied[:3]], room - 7)
            return [Segment("denied ", dim), Segment(" · ".join(shown))]
        return self._trips(card, dim, room)

    def _trips(self, card: Card, dim: Style, room: int) -> list[Segment]:
        if not card.trips:
            return [Segment("trips  ", dim), Segment("none yet", dim)]
        total = max(card.trip_total, len(card.trips))
        items = [printable(t.short) for t in card.trips[:3]]
        shown = _fitting(items, room - 7 - len(f" +{total} more"))
        left = total - len(shown)
        segments = [Segment("trips  ", dim), Segment(" · ".join(shown))]
        if left:
            segments.append(Segment(f" +{left} more", dim))
        return segments


def countdown_words(countdown: str, state: str = State.OPEN) -> str:
    """A card's countdown, said: an open one's probe goes out when it ends, a held one's hold
    runs out."""
    return f"{countdown} left" if state == State.HELD else f"probe in {countdown}"


def strip_step(cells: int) -> float:
    """A card strip's cell: half a minute, or a minute where half minutes would show less
    than a quarter of an hour (80 columns: 18 cells, the last 18 minutes)."""
    return CARD_STEP if cells * CARD_STEP >= CARD_WINDOW else 2 * CARD_STEP


def probe_words(card: Card) -> list[str]:
    """What the card says of the probe, longest form first (the line takes the longest that
    fits), as fixed times so nothing ticks. Half-open: whether a probe is out (and since
    when, as the engine's view says) or the next call will be the probe; otherwise the last
    probe's result (and how many failed in a row), else when it opened."""
    view = card.view
    if view.state == State.HALF_OPEN:
        out = card.probe_out_since
        if out is not None:
            return [f"probe out since {clock_text(out)}"]
        if card.probe_seen is not None:
            seen = clock_text(card.probe_seen)
            return [f"probe out by {seen} (a call was refused for it)", f"probe out by {seen}"]
        since = card.half_open_since
        if since is None:
            return ["next call is the probe"]
        return [
            f"next call is the probe (half-open since {clock_text(since)})",
            f"next call is the probe, since {clock_text(since)}",
            "next call is the probe",
        ]
    if card.last_probe is not None:
        result, wall = card.last_probe
        nth = f" {view.failed_probes}" if result == "failed" and view.failed_probes > 1 else ""
        return [f"probe{nth} {result} {clock_text(wall)}"]
    if view.failed_probes:
        probes = "probe" if view.failed_probes == 1 else "probes"
        return [f"{view.failed_probes} failed {probes}"]
    if card.changed_wall is not None:
        return [f"since {clock_text(card.changed_wall)}"]
    return []


def _fitting(items: list[str], room: int) -> list[str]:
    """As many whole items as fit (at least the first, cropped if it must be)."""
    shown = items[:1]
    for item in items[1:]:
        if len(" · ".join([*shown, item])) > room:
            break
        shown.append(item)
    return shown


def _fit(segments: list[Segment], width: int, style: Style) -> Strip:
    """The line cut to `width` with an ellipsis where it was cut, padded to `width`."""
    strip = Strip(segments)
    if strip.cell_length <= width:
        return strip.extend_cell_length(width, style)
    cut = strip.crop(0, max(0, width - 1))
    return Strip.join([cut, Strip([Segment("…", cut_style(segments, width))])])


def cut_style(segments: list[Segment], width: int) -> Style | None:
    """The style of the cell where a line is cut, for its ellipsis."""
    at = 0
    for segment in segments:
        at += segment.cell_length
        if at >= width - 1:
            return segment.style
    return None
