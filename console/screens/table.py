"""`t`: every breaker as one row of a table (k9s style), for wide terminals and many breakers.

The cards say more per breaker; the table shows more breakers, those the dashboard's filter
keeps (`console.filters`; the status line says so while one is set). Rows come in the board's order
(trouble first) until a column is chosen: `s` cycles the sort column, a click on a column's
header sorts by it, and choosing the same column again reverses it. The selected row stays on
its breaker through re-sorts and updates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, cast

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer

from breakerdeck.console.card import RANK_PAGED, Card
from breakerdeck.console.export import EXPORT_TIP
from breakerdeck.console.messages import Deck, DetailsRequested, ExportRequested, ResetRequested
from breakerdeck.console.steers import (
    STEERS,
    EnforceShownAction,
    SteerActions,
    enforce_shown_binding,
    steer_bindings,
)
from breakerdeck.console.widgets.bars import StatusLine, SummaryBar
from breakerdeck.console.words import clock_text, mmss
from breakerdeck.engine.state import State
from breakerdeck.engine.text import printable

_SEP = "\x1f"


def _left(card: Card, now: float) -> str:
    left = card.seconds_left(now)  # `now`: the card's own source clock (see `TableScreen.now`)
    return mmss(left) if left is not None else ""


def _state(card: Card, now: float) -> str:
    """`OPEN PAGED`, `HELD 29:00` (the hold's time left: a held breaker has no probe to count
    down to), `OPEN · SHADOW`: the words the cards say, so the column reads without colour."""
    also = ["PAGED"] if card.rank == RANK_PAGED else []
    held = card.hold_left(now)
    if held is not None:
        also.append(mmss(held))
    return card.state_words(*also)


def _since(card: Card) -> str:
    return clock_text(card.changed_wall) if card.changed_wall is not None else ""


#: (column, what it shows, how it sorts). `now` is the source's clock.
Column = tuple[str, Callable[[Card, float], str], Callable[[Card, float], Any]]
COLUMNS: list[Column] = [
    ("state", _state, lambda c, now: c.rank),
    ("agent", lambda c, now: c.agent, lambda c, now: c.agent),
    ("key", lambda c, now: c.key, lambda c, now: c.key),
    ("source", lambda c, now: c.source or "", lambda c, now: c.source or ""),
    ("count", lambda c, now: str(c.view.count), lambda c, now: -c.view.count),
    ("cause", lambda c, now: c.shown_cause or "", lambda c, now: c.view.trip_cause or ""),
    ("probe in", _left, lambda c, now: c.seconds_left(now) or float("inf")),
    ("since", lambda c, now: _since(c), lambda c, now: -(c.changed_wall or 0.0)),
    ("denied", lambda c, now: str(c.denied_total), lambda c, now: -c.denied_total),
    ("trips", lambda c, now: str(max(c.trip_total, len(c.trips))),
     lambda c, now: -max(c.trip_total, len(c.trips))),
    ("platform", lambda c, now: c.platform or "", lambda c, now: c.platform or ""),
]  # fmt: skip

#: The cells that count down, by state: an open row's probe, a held row's time left.
_COUNTDOWNS: dict[str, tuple[str, Callable[[Card, float], str]]] = {
    State.OPEN: ("probe in", _left),
    State.HELD: ("state", _state),
}


class TableScreen(SteerActions, EnforceShownAction, Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("t,escape", "app.pop_screen", "Cards", id="table-cards"),
        Binding("enter", "details", "Details", id="table-details"),
        Binding("r", "reset", "Reset", id="table-reset"),
        Binding("s", "sort", "Sort", id="table-sort", tooltip="next column"),
        *steer_bindings("table-"),
        enforce_shown_binding("table-"),
        Binding("e", "export", "Export", show=False, id="table-export", tooltip=EXPORT_TIP),
        Binding("question_mark", "app.help", "Help", id="table-help"),
        Binding("q", "app.quit", "Quit", id="table-quit"),
    ]

    def __init__(self) -> None:
        super().__init__(id="table")
        #: The sort column's index (None: the board's order) and whether it is reversed.
        self.sort_by: int | None = None
        self.reverse = False
        self.cards: list[Card] = []
        self.columns: list[Column] = list(COLUMNS)

    @property
    def deck(self) -> Deck:
        """The app, as far as this screen reads it (it posts messages for everything else)."""
        return cast(Deck, self.app)

    def compose(self) -> ComposeResult:
        yield SummaryBar(id="table-summary")
        yield StatusLine(id="table-status")
        yield DataTable(id="breakers", cursor_type="row", zebra_stripes=True)
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        cards = self.deck.board.cards()
        # Only the columns that say something here: under `agent` the key is the agent, and
        # one source needs no source column.
        skip = set()
        if self.deck.board.thresholds.kind == "agent":
            skip.add("key")
        if not any(card.source for card in cards):
            skip.add("source")
        self.columns = [column for column in COLUMNS if column[0] not in skip]
        for name, _, _ in self.columns:
            table.add_column(name, key=name)
        table.focus()
        self.board_changed()

    # -- data --------------------------------------------------------------------------------

    def board_changed(self) -> None:
        if not self.query(DataTable):  # torn down (the app is exiting): nothing to draw
            return
        table = self.query_one(DataTable)
        selected = self.selected_card
        every = self.deck.board.cards()
        kept = self.deck.active_filter()
        cards = kept.keep(every)
        self.query_one(StatusLine).show(
            filter_text=kept.text, shown=len(cards), total=len(every), faults={}
        )
        if self.sort_by is not None:
            order = self.columns[self.sort_by][2]
            cards.sort(key=lambda card: order(card, self.now(card)), reverse=self.reverse)
        self.cards = cards
        with self.app.batch_update():
            table.clear()
            for card in cards:
                table.add_row(*self._cells(card, self.now(card)), key=_row_key(card))
            if selected is not None:
                at = next((i for i, c in enumerate(cards) if c.ident == selected.ident), 0)
                table.move_cursor(row=at)
        self._show_summary()

    def now(self, card: Card) -> float:
        return self.deck.now_for(card.id)

    def _cells(self, card: Card, now: float) -> list[Text]:
        return [_cell(card, name, shown, now) for name, shown, _ in self.columns]

    def _show_summary(self) -> None:
        self.query_one(SummaryBar).show_deck(self.deck)

    def tick(self) -> None:
        """The countdowns only, nothing else moves with the clock: an open row's probe, a held
        row's time left (in its state)."""
        if not self.query(DataTable):  # torn down (the app is exiting)
            return
        table = self.query_one(DataTable)
        for card in self.cards:
            counting = _COUNTDOWNS.get(card.state)
            if counting is not None:
                name, shown = counting
                table.update_cell(_row_key(card), name, _cell(card, name, shown, self.now(card)))
        self._show_summary()

    @property
    def selected_card(self) -> Card | None:
        table = self.query_one(DataTable)
        row = table.cursor_row
        return self.cards[row] if 0 <= row < len(self.cards) and table.row_count else None

    # -- keys --------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[Any, ...]) -> bool | None:
        if action == "reset" and self.is_mounted:
            return self.deck.reset_offer(self.selected_card)
        if action in ("details", "export") and self.is_mounted:
            return self.selected_card is not None or None
        if action in STEERS and self.is_mounted:
            return self.deck.steer_offer(action, self.selected_card)
        if action == "enforce_shown" and self.is_mounted:
            return self.deck.enforce_offer(self.cards)
        return True

    def action_sort(self) -> None:
        self._sort(0 if self.sort_by is None else (self.sort_by + 1) % len(self.columns))

    @on(DataTable.HeaderSelected)
    def _header(self, event: DataTable.HeaderSelected) -> None:
        self._sort(event.column_index)

    def _sort(self, column: int) -> None:
        self.reverse = column == self.sort_by and not self.reverse
        self.sort_by = column
        self.board_changed()

    @on(DataTable.RowHighlighted)
    def _moved(self) -> None:
        self.refresh_bindings()

    def action_details(self) -> None:
        card = self.selected_card
        if card is not None:
            self.post_message(DetailsRequested(card))

    @on(DataTable.RowSelected)
    def _chosen(self) -> None:
        self.action_details()

    def action_reset(self) -> None:
        card = self.selected_card
        if card is not None:
            self.post_message(ResetRequested(card))

    def steer_card(self) -> Card | None:
        return self.selected_card

    def shown_cards(self) -> list[Card]:
        return list(self.cards)

    def action_export(self) -> None:
        card = self.selected_card
        if card is not None:
            self.post_message(ExportRequested(card))


def _cell(card: Card, name: str, shown: Callable[[Card, float], str], now: float) -> Text:
    style = card.look.label if name == "state" else ""
    return Text(printable(shown(card, now)), style=style, no_wrap=True)


def _row_key(card: Card) -> str:
    return f"{card.agent}{_SEP}{card.id}"
