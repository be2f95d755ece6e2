"""The breaker cards, drawn with Textual's Line API so only what is on screen is ever rendered.

A widget per card cannot reach 10,000 breakers (mounting and laying out thousands of widgets
costs seconds and most of a core). This is one `ScrollView`: the cards are rows of plain data,
`render_line` draws the few lines on screen from cached `Strip`s, and the one-second tick
repaints only the title lines of visible open cards, whose countdown moved.

Cards reflow: as many columns as `MIN_CARD_WIDTH` allows (one at 80 columns, two at 160). A
trouble card has five lines; a closed one three. A row is as tall as its tallest card.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from breakerdeck.console.card import RANK_CLOSED, RANK_PAGED, Card, Thresholds
from breakerdeck.console.hint import hint
from breakerdeck.console.timeline import CARD_STEP, busy, span_text, strip
from breakerdeck.console.words import cause_word, clock_text, mmss
from breakerdeck.engine.text import printable

MIN_CARD_WIDTH = 76
TROUBLE_LINES = 5
CLOSED_LINES = 3
STATE_WIDTH = 11  # "HALF-OPEN" and "OPEN 04:12" fit, then two spaces
#: The title line's state timeline: after the name's room, ending before the cooldown's.
NAME_ROOM = 27  # "billing-assistant  PAGED " fits: strips of one width, card under card
COOLDOWN_ROOM = len("cooldown 900s")
MIN_STRIP = 8
MAX_STRIP = 96
#: The least a card's strip shows: a 300 s cooldown, its probe and some of what came before.
CARD_WINDOW = 15 * 60.0
_CACHE_LIMIT = 4096
_NEAR = 64  # places either side of where the selected card was, searched first


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


class CardList(ScrollView, can_focus=True):
    """All cards in order; one is selected. Renders only visible lines."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "cards--open",
        "cards--half-open",
        "cards--paused",
        "cards--closed",
        "cards--paged",
        "cards--selected",
        "cards--name",
        "cards--dim",
        "cards--hint",
        "cards--empty",
        "cards--mark",
    }

    # The scroll keys a `ScrollView` has move the selection here instead: the list scrolls
    # to keep the selected card in view, so `enter` and `r` act on a card the operator sees.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j,down", "move(1)", "Next", show=False, id="next"),
        Binding("k,up", "move(-1)", "Previous", show=False, id="previous"),
        Binding("pagedown", "page(1)", "Page down", show=False, id="page-down"),
        Binding("pageup", "page(-1)", "Page up", show=False, id="page-up"),
        Binding("home,g", "edge(0)", "First", show=False, id="first"),
        Binding("end,G", "edge(1)", "Last", show=False, id="last"),
    ]

    DEFAULT_CSS = """
    CardList {
        height: 1fr;
        scrollbar-size-vertical: 1;
        overflow-x: hidden;
    }
    """

    class Selected(Message):
        """The selection moved to another card (or to none)."""

        def __init__(self, card: Card | None) -> None:
            super().__init__()
            self.card = card

    class Opened(Message):
        """A double click: show this card's details."""

        def __init__(self, card: Card) -> None:
            super().__init__()
            self.card = card

    def __init__(
        self,
        thresholds: Thresholds,
        now: Callable[[], float],
        *,
        now_for: Callable[[Card], float] | None = None,
        fix_key: Callable[[Card], bool] | None = None,
        fixed: Callable[[Card], bool] | None = None,
        stale_since: Callable[[Card], float | None] | None = None,
        approximate: bool = False,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        #: The counters are approximate (an audit log replayed): they read `count ≈5`.
        self.approximate = approximate
        self.thresholds = thresholds
        self.now = now
        #: The clock a card's countdown runs on (its source's: a sped-up engine runs faster).
        self.now_for = now_for or (lambda card: now())
        self.fix_key = fix_key or (lambda card: False)
        #: The credential behind the card's auth trip was fixed since: its hint says reset.
        self.fixed = fixed or (lambda card: False)
        #: When the card's source lost its engine (None while live): drawn on its title line.
        self.stale_since = stale_since or (lambda card: None)
        self.cards: list[Card] = []
        #: The selected breaker. Until the operator moves the selection it follows the top
        #: card (the news); once moved, it stays on its breaker through re-sorts (the top
        #: card again when the selected one is filtered out or gone, and after `g`).
        self.selected: tuple[str, str] | None = None
        self.follow_top = True
        self.empty_text = "no breakers yet"
        self._columns = 1
        self._row_y: list[int] = [0]
        self._row_h: list[int] = []
        self._cache: dict[tuple[object, ...], tuple[Card, Strip]] = {}
        self._index: dict[tuple[str, str], int] | None = None
        self._selected_at = 0  # where the selected card was last seen
        self._laid_out: tuple[int, int, list[int]] | None = None
        #: Virtual line -> the strip last handed to Textual for it (see `_refresh_changed`).
        self._shown: dict[int, Strip] = {}
        #: Which half minute the timelines end in: they slide when it changes.
        self._slot: int | None = None

    # -- data --------------------------------------------------------------------------------

    def set_cards(self, cards: Sequence[Card]) -> None:
        """New card list (already sorted and filtered). Keeps the selection on the same card."""
        self.cards = list(cards)
        self._index = None  # built when a lookup misses: most repaints never need it
        if self.follow_top or self.selected_index is None:
            first = self.cards[0].ident if self.cards else None
            if first != self.selected:
                self.selected = first
                self._selected_at = 0
                self.post_message(self.Selected(self.selected_card))
        if len(self._cache) > _CACHE_LIMIT:
            self._cache.clear()
        if self._layout_rows() or not self.cards:
            self.refresh()
        else:
            self._refresh_changed()

    def _refresh_changed(self) -> None:
        """Repaint only the visible lines that now read differently: a flood of events on
        open cards (denied calls) changes a line or two, and a whole-list repaint rewrote every
        card line four times a second over SSH."""
        top = int(self.scroll_offset.y)
        for y in range(self.scrollable_content_region.height):
            if self._shown.get(top + y) != self._line(y):
                self.refresh_lines(top + y)

    @property
    def selected_card(self) -> Card | None:
        index = self.selected_index
        return None if index is None else self.cards[index]

    @property
    def selected_index(self) -> int | None:
        if self.selected is None:
            return None
        index = self._find(self.selected, self._selected_at)
        if index is not None:
            self._selected_at = index
        return index

    def _find(self, ident: tuple[str, str], near: int) -> int | None:
        """Where a card is: a flood moves a card by a few places between repaints, so look
        around where it was before building an index of every card."""
        agent, key = ident
        cards = self.cards
        for index in range(max(0, near - _NEAR), min(len(cards), near + _NEAR + 1)):
            card = cards[index]
            if card.agent == agent and card.view.key == key:
                return index
        if self._index is None:
            self._index = {card.ident: index for index, card in enumerate(cards)}
        return self._index.get(ident)

    def move(self, delta: int) -> None:
        """Move the selection; from a selection out of view (a re-sort pushed it off), the
        first press selects the top card on screen instead of a card the operator cannot see."""
        if not self.cards:
            return
        index = self.selected_index
        if index is not None and not self.in_view(index):
            rows = self.visible_rows()
            self.select_index(rows.start * self._columns if rows else 0)
            return
        index = 0 if index is None else max(0, min(len(self.cards) - 1, index + delta))
        self.select_index(index)

    def action_move(self, delta: int) -> None:
        self.move(delta)

    def action_page(self, direction: int) -> None:
        self.move(direction * self.page_cards)

    def action_edge(self, end: int) -> None:
        """`G` the last card; `g` the top one, and the selection follows the top again."""
        self.select_index(len(self.cards) - 1 if end else 0, follow=not end)

    def on_click(self, event: events.Click) -> None:
        """A click selects the card under the pointer; a double click opens it."""
        index = self.index_at(event.x, event.y)
        if index is None:
            return
        self.select_index(index)
        if event.chain >= 2:
            self.post_message(self.Opened(self.cards[index]))

    def index_at(self, x: int, y: int) -> int | None:
        """The card drawn at (x, y) of the widget, if any."""
        if not self.cards:
            return None
        row = bisect_right(self._row_y, y + int(self.scroll_offset.y)) - 1
        if row < 0 or row >= len(self._row_h):
            return None
        width = self.scrollable_content_region.width or self.size.width
        column = min(self._columns - 1, max(0, x) // max(1, width // self._columns))
        index = row * self._columns + column
        return index if index < len(self.cards) else None

    def in_view(self, index: int) -> bool:
        """Whether card `index`'s title line is on screen."""
        row = index // self._columns
        if row >= len(self._row_h):
            return False
        return row in self.visible_rows()

    def selection_out_of_view(self) -> Card | None:
        """The selected card when the operator cannot see it (a re-sort pushed it down, or
        the wheel scrolled): the status line says where the keys would act."""
        index = self.selected_index
        if index is None or not self._row_h or self.in_view(index):
            return None
        return self.cards[index]

    def shown_selection(self) -> Card | None:
        """The selected card if the operator can see it; if not (the wheel scrolled, or a
        re-sort pushed it off), scroll it into view and return None: a key acts only on a
        card on screen, and the next press acts on the one now shown."""
        index = self.selected_index
        if index is None:
            return None
        if self.in_view(index):
            return self.cards[index]
        self.select_index(index, follow=self.follow_top)
        return None

    def select_index(self, index: int, *, follow: bool = False) -> None:
        """Select card `index` and scroll it into view. The operator chose it, so it stays on
        its breaker from now on, unless `follow`: then it follows the top card again."""
        if not self.cards:
            return
        index = max(0, min(len(self.cards) - 1, index))
        self.follow_top = follow and index == 0
        self.selected = self.cards[index].ident
        self._selected_at = index
        self.refresh()
        row = index // self._columns
        if row < len(self._row_h):
            region = Region(0, self._row_y[row], self.size.width, self._row_h[row])
            self.scroll_to_region(region, animate=False, immediate=True)
        self.post_message(self.Selected(self.cards[index]))

    @property
    def page_cards(self) -> int:
        rows = max(1, self.scrollable_content_region.height // TROUBLE_LINES)
        return rows * self._columns

    # -- layout ------------------------------------------------------------------------------

    def on_resize(self) -> None:
        self._layout_rows()
        self.refresh()

    def _layout_rows(self) -> bool:
        """Lay the rows out again if their heights or the width changed (then True)."""
        width = self.scrollable_content_region.width or self.size.width or 80
        columns = max(1, width // MIN_CARD_WIDTH)
        heights = [card_height(card) for card in self.cards]
        if (width, columns, heights) == self._laid_out:
            return False  # the cards changed places or content, not the rows' heights
        self._laid_out = (width, columns, heights)
        self._columns = columns
        if columns > 1:
            heights = [max(heights[i : i + columns]) for i in range(0, len(heights), columns)]
        self._row_h = heights
        self._row_y = [0, *accumulate(heights)]
        total = self._row_y[-1] if self.cards else 1
        self.virtual_size = Size(width, total)
        self._shown.clear()
        return True

    def visible_rows(self) -> range:
        top = int(self.scroll_offset.y)
        bottom = top + self.scrollable_content_region.height
        first = max(0, bisect_right(self._row_y, top) - 1)
        last = min(len(self._row_h), bisect_right(self._row_y, bottom))
        return range(first, last)

    def tick(self) -> int:
        """Repaint the countdown cells of each visible open card (the whole title line of a
        stale one, whose "ago" moves); returns how many cards that was. Only those cells are
        written to the terminal."""
        repainted = 0
        width = self.scrollable_content_region.width or self.size.width
        card_width = width // self._columns
        top = int(self.scroll_offset.y)
        slot = int(self.now() // CARD_STEP)
        # the timelines moved a cell on since the last tick (the first draw was up to date)
        slid = self._slot is not None and slot != self._slot
        self._slot = slot
        since = (slot + 1 - 2 * MAX_STRIP) * CARD_STEP
        for row in self.visible_rows():
            start = row * self._columns
            shown = self.cards[start : start + self._columns]
            # a card under its key's aggregate line has its title one line down
            y = self._row_y[row] + (1 if any(c.aggregate for c in shown) else 0) - top
            for column, card in enumerate(shown):
                strip_moved = slid and busy(card.timeline, card.marks, since)
                if self.stale_since(card) is not None or strip_moved:
                    self.refresh(Region(column * card_width, y, card_width, 1))
                elif card.state == "open":
                    self.refresh(Region(column * card_width + 2, y, STATE_WIDTH, 1))
                else:
                    continue
                repainted += 1
        return repainted

    # -- rendering ---------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        strip = self._line(y)
        self._shown[y + int(self.scroll_offset.y)] = strip
        return strip

    def _line(self, y: int) -> Strip:
        """Line `y` of the widget as it reads now (drawn from cached strips)."""
        width = self.scrollable_content_region.width or self.size.width
        base = self.rich_style
        if not self.cards:
            if y == 1:
                style = self.get_component_rich_style("cards--empty")
                text = f"  {printable(self.empty_text)}"
                return Strip([Segment(text, style)]).crop_extend(0, width, base)
            return Strip.blank(width, base)
        vy = y + int(self.scroll_offset.y)
        row = bisect_right(self._row_y, vy) - 1
        if row < 0 or row >= len(self._row_h):
            return Strip.blank(width, base)
        line = vy - self._row_y[row]
        columns = self._columns
        card_width = width // columns
        strips = []
        for column in range(columns):
            index = row * columns + column
            cell = card_width if column < columns - 1 else width - card_width * (columns - 1)
            if index >= len(self.cards):
                strips.append(Strip.blank(cell, base))
                continue
            strips.append(self._card_line(self.cards[index], line, cell))
        return Strip.join(strips)

    def _card_line(self, card: Card, line: int, width: int) -> Strip:
        selected = card.ident == self.selected
        countdown = stale = slot = None
        title = 1 if card.aggregate else 0
        if line == title:
            now = self.now_for(card)
            if card.timeline:
                slot = int(now // CARD_STEP)
            if card.state == "open":
                left = card.seconds_left(now)
                countdown = mmss(left) if left is not None else None
            since = self.stale_since(card)
            if since is not None:
                stale = f" STALE since {clock_text(since)} ({ago(now - since)} ago) "
        fixed = card.auth_trip and self.fixed(card)  # changes without the card changing
        key = (card.ident, line, width, selected, countdown, stale, fixed, slot)
        cached = self._cache.get(key)
        if cached is not None and cached[0] is card:  # drawn from this very card
            return cached[1]
        drawn = self._draw(card, line, width, selected, countdown, stale, fixed, slot)
        self._cache[key] = (card, drawn)
        return drawn

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
        state_style = self.get_component_rich_style(_STATE_CLASS[card.word])
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
        word = card.word
        if countdown is not None and word == "OPEN":
            word = f"OPEN {countdown}"
        kind = (card.limits or self.thresholds).kind
        name = card.agent if kind == "agent" else f"{card.agent} · {card.key}"
        name = printable(name)
        segments = [
            Segment("▶ " if selected else "  "),
            Segment(f"{word:<{STATE_WIDTH}}", state_style + Style(bold=True)),
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
        if slot is not None:
            segments += self._timeline(card, slot, segments, width)
        if card.state != "closed":  # the cooldown this open episode runs, right-aligned
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
            state: self.get_component_rich_style(_STATE_CLASS[word]) + plain
            for state, word in _TIMELINE_WORDS.items()
        }
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
            parts = [f"count {'≈' if self.approximate else ''}{limits.counter(view.count)}"]
            if view.state != "closed":
                parts.append(f"cause {cause_word(view.trip_cause)}")
                forms = probe_words(card)
                used = len(" · ".join(parts)) + 3
                # the longest form that fits: the probe's words must never be cut
                parts.extend(next(([f] for f in forms if used + len(f) <= room), forms[-1:]))
            if card.rank == RANK_CLOSED:
                parts.append(hint(card))
            return [Segment(" · ".join(parts))]
        if card.rank == RANK_CLOSED:  # a closed card's last line: its trips
            return self._trips(card, dim, room)
        if line == 2:
            text = "→ " + hint(card, keys=True, fixable=self.fix_key(card), fixed=fixed)
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
    if view.state == "half_open":
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


_TIMELINE_WORDS = {
    "open": "OPEN",
    "half_open": "HALF-OPEN",
    "paused": "PAUSED",
    "closed": "CLOSED",
    "unknown": "CLOSED",
}

_STATE_CLASS = {
    "OPEN": "cards--open",
    "HALF-OPEN": "cards--half-open",
    "PAUSED": "cards--paused",
    "CLOSED": "cards--closed",
}
