"""The breaker cards, drawn with Textual's Line API so only what is on screen is ever rendered.

A widget per card cannot reach 10,000 breakers (mounting and laying out thousands of widgets
costs seconds and most of a core). This is one `ScrollView`: the cards are rows of plain data,
`render_line` draws the few lines on screen from cached `Strip`s, and the one-second tick
repaints only the countdowns of visible open cards, at the end of their title lines.

Cards reflow: as many columns as `MIN_CARD_WIDTH` allows (one at 80 columns, two at 160). A
trouble card has five lines; a closed one three. A row is as tall as its tallest card.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import ClassVar

from rich.segment import Segment
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.strip import Strip

from breakerdeck.console.card import Card, Thresholds
from breakerdeck.console.states import component_classes, state_css
from breakerdeck.console.timeline import CARD_STEP, busy
from breakerdeck.console.widgets.card_lines import (
    COUNTDOWN_CELLS,
    MAX_STRIP,
    TROUBLE_LINES,
    CardLines,
    ago,
    card_height,
)
from breakerdeck.console.words import clock_text, mmss
from breakerdeck.engine.state import State
from breakerdeck.engine.text import printable

MIN_CARD_WIDTH = 76
#: The states whose title counts down: an open breaker's probe, a held one's hold.
_COUNTING = (State.OPEN, State.HELD)
_CACHE_LIMIT = 4096
_NEAR = 64  # places either side of where the selected card was, searched first


class CardList(CardLines, can_focus=True):
    """All cards in order; one is selected. Renders only visible lines."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *component_classes("cards"),
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

    DEFAULT_CSS = (
        "CardList { height: 1fr; scrollbar-size-vertical: 1; overflow-x: hidden; }\n"
        + state_css("CardList", "cards", reversed_without_colour=True)
    )

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
        reset_key: Callable[[Card], bool] | None = None,
        release_key: Callable[[Card], bool] | None = None,
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
        self.reset_key = reset_key or (lambda card: False)
        self.release_key = release_key or (lambda card: False)
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
                elif card.state in _COUNTING:
                    right = (column + 1) * card_width - COUNTDOWN_CELLS
                    self.refresh(Region(right, y, COUNTDOWN_CELLS, 1))
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
            left = card.seconds_left(now) if card.state == State.OPEN else card.hold_left(now)
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
