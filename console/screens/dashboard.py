"""The dashboard: summary, demo status, the cards, a filter box and the footer."""

from __future__ import annotations

from typing import ClassVar, cast

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container
from textual.screen import Screen
from textual.widgets import Footer, Input

from breakerdeck.console.card import Card
from breakerdeck.console.export import EXPORT_TIP
from breakerdeck.console.filters import Filter, parse
from breakerdeck.console.messages import (
    Deck,
    DemoFaultRequested,
    DetailsRequested,
    ExportRequested,
    FixRequested,
    ResetRequested,
    TableRequested,
)
from breakerdeck.console.steers import (
    STEERS,
    EnforceShownAction,
    SteerActions,
    enforce_shown_binding,
    steer_bindings,
)
from breakerdeck.console.widgets.bars import SelectionHint, StatusLine, SummaryBar
from breakerdeck.console.widgets.cards import CardList
from breakerdeck.console.widgets.log import EventLog
from breakerdeck.console.widgets.tabs import ContextTabs

#: Where the event log shows: this wide (beside the cards) or this tall (under them).
WIDE, TALL = 120, 40
#: Beside the cards, the log takes what the card columns leave, this much at least and most.
CARD_COLUMN, LOG_MIN, LOG_MAX = 78, 60, 80
#: Under the cards, the log takes the rows past what 80x24 gives the cards.
ROWS_AT_80X24 = 24

#: The actions whose offer (`check_action`) depends on the selected card or the filter.
_CHANGING_ACTIONS = (
    "reset",
    "reset_every",
    "details",
    "export",
    "fix",
    "clear_filter",
    *STEERS,
)


class DashboardScreen(SteerActions, EnforceShownAction, Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "app.help", "Help", id="help"),
        # Second, not last: at 80 columns the demo's keys would push it off the footer.
        Binding("q", "app.quit", "Quit", id="quit"),
        # Priority: handled before the keys typed after it reach the card list (fast typists,
        # pasted text, a laggy SSH link), so "/pay" filters on "pay".
        Binding("slash", "filter", "Filter", id="filter", priority=True),
        Binding("enter", "details", "Details", id="details"),
        Binding("t", "table", "Table", id="table", tooltip="every breaker as a row"),
        Binding("r", "reset", "Reset", id="reset"),
        Binding("R", "reset_every", "Reset all", id="reset-every", tooltip="on every source"),
        Binding("f", "fix", "Fixed", id="fix", tooltip="credential fixed"),
        *steer_bindings(),
        enforce_shown_binding(),
        # One footer entry for the three demo keys: three of their own ran past 80 columns
        # and left a lone `x` at the edge (the help lists each).
        Binding(
            "d",
            "platform_down",
            "Faults",
            id="demo-down",
            key_display="d/u/x",
            tooltip="demo: platform down (d), up (u), credential revoked (x)",
        ),
        Binding("u", "platform_up", "Up", show=False, id="demo-up"),
        Binding("x", "revoke", "Revoke", show=False, id="demo-revoke"),
        Binding("escape", "clear_filter", "Clear", show=False, id="clear-filter"),
        # Not in the footer (80 columns are full): the help and the palette list it.
        Binding("e", "export", "Export", show=False, id="export", tooltip=EXPORT_TIP),
    ]

    def __init__(self, filter_text: str = "", *, id: str = "dashboard") -> None:
        """`filter_text`: shown filtered by it from the start (`--view`). `id`: each tab's
        dashboard has its own (`dashboard`, then `dashboard-2`, …)."""
        super().__init__(id=id)
        #: The filter as typed, and as read by `console.filters` (the table keeps it too).
        self.filter_text = filter_text.strip()
        self.filter: Filter = parse(self.filter_text)
        self._offered: tuple[bool | None, ...] | None = None  # see `_refresh_bindings`
        self._shown_of = (0, 0)  # cards shown, of how many: the status line's last numbers

    @property
    def deck(self) -> Deck:
        """The app, as far as this screen reads it (it posts messages for everything else)."""
        return cast(Deck, self.app)

    def compose(self) -> ComposeResult:
        app = self.deck
        yield ContextTabs(id="tabs")
        yield SummaryBar(id="summary")
        yield StatusLine(id="status")
        with Container(id="room"):
            yield CardList(
                app.board.thresholds,
                app.now,
                now_for=lambda card: app.now_for(card.id),
                fix_key=lambda card: bool(app.fix_offer(card)),
                reset_key=lambda card: bool(app.reset_offer(card)),
                release_key=lambda card: bool(app.steer_offer("release", card)),
                fixed=app.fixed,
                stale_since=lambda card: app.fleet.stale_for(card.id),
                approximate=app.source.approximate_counts,
                id="cards",
            )
            yield EventLog(id="log")
        yield SelectionHint(id="offscreen")
        yield Input(
            placeholder="filter: words, state:open, agent:billing* (enter keeps, escape clears)",
            id="filter",
        )
        # No "^p palette" here: at 80 columns it pushed the last keys off (the help lists it).
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        self.query_one(Input).display = False
        self.query_one(CardList).focus()
        self._arrange(self.app.size.width, self.app.size.height)
        self.board_changed()

    def on_resize(self, event: events.Resize) -> None:
        self._arrange(event.size.width, event.size.height)

    def _arrange(self, width: int, height: int) -> None:
        """The event log where there is room: beside the cards from `WIDE` columns (the card
        columns keep their width), else under them from `TALL` rows (the cards keep the rows
        80x24 gives them); at 80x24 it is not shown and nothing else moves."""
        room = self.query_one("#room")
        log = self.query_one(EventLog)
        wide = width >= WIDE
        tall = not wide and height >= TALL
        room.set_class(wide, "wide")
        room.set_class(tall, "tall")
        log.display = wide or tall
        if wide:
            columns = max(1, (width - LOG_MIN) // CARD_COLUMN)
            cards = max(CARD_COLUMN * columns, width - LOG_MAX)
            log.styles.width = width - cards
            log.styles.height = "1fr"
        elif tall:
            log.styles.width = "1fr"
            log.styles.height = max(8, min(height - ROWS_AT_80X24, height // 2))

    @property
    def cards(self) -> CardList:
        return self.query_one(CardList)

    # -- updates -----------------------------------------------------------------------------

    def board_changed(self) -> None:
        if not self.query(CardList):  # torn down (the app is exiting): nothing to draw
            return
        board = self.deck.board
        every = board.cards()
        shown = self.filter.keep(every)
        cards = self.cards
        problem = self.filter.problem
        if problem:
            cards.empty_text = problem  # the line's room is the problem's (escape clears)
        elif self.filter:
            cards.empty_text = f"nothing matches “{self.filter_text}” (escape clears the filter)"
        else:
            cards.empty_text = "no breakers yet: they appear with the first call"
        cards.set_cards(shown)
        log = self.query_one(EventLog)
        if log.display:
            board = self.deck.board
            rows = board.log_rows(self.filter)
            log.show(rows, len(board.log), self.filter_text, board.log_version)
        self._show_status(len(shown), len(every))
        self.show_summary()
        self._refresh_bindings()

    def _refresh_bindings(self) -> None:
        """Redraw the footer only when a key's offer changed: Textual's `Footer` rebuilds all
        its keys on every `refresh_bindings()`, which under a flood cost more than the cards."""
        offered = tuple(self.check_action(action, ()) for action in _CHANGING_ACTIONS)
        if offered != self._offered:
            self._offered = offered
            self.refresh_bindings()

    def show_summary(self) -> None:
        self.query_one(SummaryBar).show_deck(self.deck)
        self.tabs_changed()

    def tabs_changed(self) -> None:
        """The contexts' tabs: their counts change with news on any of them."""
        if self.query(ContextTabs):  # torn down (the app is exiting): nothing to draw
            self.query_one(ContextTabs).show(self.deck.tab_titles())

    def _show_status(self, shown: int, total: int) -> None:
        self._shown_of = (shown, total)
        controls, stores = self.deck.controls, self.deck.stores
        faults = controls.status() if controls is not None else {}
        self.query_one(StatusLine).show(
            filter_text=self.filter_text,
            shown=shown,
            total=total,
            faults=faults,
            store_lost=self.deck.store_lost(),
            store_warnings=[] if stores is None else stores.shared_store_warnings(),
            player=self.deck.player_status(),
        )
        hidden = self.cards.selection_out_of_view() if self.is_mounted else None
        self.query_one(SelectionHint).show(hidden)

    def tick(self) -> None:
        if not self.query(CardList):  # torn down (the app is exiting)
            return
        # Open cards count down, a stale source's cards say how long ago it was lost, and
        # timelines slide a cell every half minute (the visible cards only: a few lines).
        self.cards.tick()
        self.show_summary()
        # An in-process engine's store is lost or back without an event: the line follows the
        # clock, as the header does (it repaints only when its text changed).
        self._show_status(*self._shown_of)

    # -- keys --------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        card = self.cards.selected_card if self.is_mounted else None
        if action == "reset":
            return self.deck.reset_offer(card)
        if action == "reset_every":
            return card is not None and bool(self.deck.reset_targets(card))
        if action in ("details", "export"):
            return card is not None or None
        if action == "fix":
            return self.deck.fix_offer(card)
        if action in STEERS:
            return self.deck.steer_offer(action, card)
        if action == "enforce_shown":
            return self.deck.enforce_offer(self.shown_cards()) if self.is_mounted else None
        if action in ("platform_down", "platform_up", "revoke"):
            return self.deck.fault_offer()  # hidden outside demo mode and from web viewers
        if action == "clear_filter":  # the filter, else any toasts
            return True
        return True

    @on(CardList.Selected)
    def _selected(self) -> None:
        self._refresh_bindings()
        self._show_status(*self._shown_of)  # the off-screen hint goes with the move

    def action_filter(self) -> None:
        box = self.query_one(Input)
        box.value = self.filter_text
        box.display = True
        # At once, not deferred like `focus()`: keys typed right after `/` belong to the box.
        self.set_focus(box)

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self._filter_by(event.value)

    def _filter_by(self, text: str) -> None:
        self.filter_text = text.strip()
        self.filter = parse(self.filter_text)
        self.board_changed()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self) -> None:
        box = self.query_one(Input)
        box.display = False
        self.cards.focus()
        self.cards.select_index(0, follow=True)
        self._say_problem()

    def set_filter(self, text: str) -> None:
        """Set the filter as if typed after `/` and kept with `enter` (a saved view, the
        palette): a term it cannot read is said in a notice."""
        box = self.query_one(Input)
        with box.prevent(Input.Changed):
            box.value = text
        box.display = False
        self._filter_by(text)
        self.cards.focus()
        self.cards.select_index(0, follow=True)
        self._say_problem()

    def _say_problem(self) -> None:
        problem = self.filter.problem
        if problem:
            self.notify(f"Filter “{self.filter_text}”: {problem}", severity="warning", timeout=6)

    def action_clear_filter(self) -> None:
        """Escape clears the filter; with none, it dismisses the toasts in the corner."""
        box = self.query_one(Input)
        if not (self.filter_text or box.display):
            self.app.clear_notifications()
            return
        with box.prevent(Input.Changed):
            box.value = ""
        box.display = False
        self.cards.focus()
        self._filter_by("")

    def action_table(self) -> None:
        self.post_message(TableRequested())

    def action_details(self) -> None:
        card = self.cards.shown_selection()
        if card is not None:
            self.post_message(DetailsRequested(card))

    @on(CardList.Opened)
    def _opened(self, event: CardList.Opened) -> None:
        self.post_message(DetailsRequested(event.card))

    def action_export(self) -> None:
        card = self.cards.shown_selection()
        if card is not None:
            self.post_message(ExportRequested(card))

    def action_reset(self) -> None:
        card = self.cards.shown_selection()
        if card is not None:
            self.post_message(ResetRequested(card))

    def action_reset_every(self) -> None:
        card = self.cards.shown_selection()
        if card is not None:
            self.post_message(ResetRequested(card, every=True))

    def action_fix(self) -> None:
        card = self.cards.shown_selection()
        if card is not None:
            self.post_message(FixRequested(card))

    def steer_card(self) -> Card | None:
        return self.cards.shown_selection()

    def shown_cards(self) -> list[Card]:
        return list(self.cards.cards)

    def action_platform_down(self) -> None:
        self._demo("take_down")

    def action_platform_up(self) -> None:
        self._demo("bring_back")

    def action_revoke(self) -> None:
        self._demo("revoke")

    def _demo(self, what: str) -> None:
        self.post_message(DemoFaultRequested(what, self.cards.selected_card))
