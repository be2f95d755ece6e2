"""One breaker in detail: state, the hint, the failures before each trip, and its audit log."""

from __future__ import annotations

from typing import Any, ClassVar, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from breakerdeck.console.card import Card
from breakerdeck.console.export import EXPORT_TIP
from breakerdeck.console.hint import hint
from breakerdeck.console.log_rows import describe, short_type
from breakerdeck.console.messages import (
    Deck,
    ExportRequested,
    FixRequested,
    ResetRequested,
)
from breakerdeck.console.states import BY_NAME
from breakerdeck.console.steers import STEERS, SteerActions, steer_bindings
from breakerdeck.console.timeline import (
    CARD_STEP,
    LEGEND,
    episode,
    fit_step,
    span_text,
    strip,
)
from breakerdeck.console.widgets.card_lines import countdown_words
from breakerdeck.console.words import cause_word, clock_text, mmss
from breakerdeck.engine import events as ev
from breakerdeck.engine.events import Event
from breakerdeck.engine.state import State
from breakerdeck.engine.text import printable

AUDIT_ROWS = 200


def trips_with_failures(rows: list[Event]) -> list[tuple[Event, list[Event], Event | None]]:
    """Each trip (newest first) with the counted failures that led to it and what ended it."""
    trips: list[tuple[Event, list[Event], Event | None]] = []
    pending: list[Event] = []
    for event in reversed(rows):  # oldest first
        if event.type == ev.CALL_FAILED and event.fields.get("counted"):
            pending.append(event)
        elif event.type == ev.TRIPPED:
            count = int(event.fields.get("count") or len(pending))
            trips.append((event, pending[-count:] if count else [], None))
            pending = []
        elif event.type in (ev.RECOVERED, ev.RESET):
            if trips and trips[-1][2] is None:
                trips[-1] = (trips[-1][0], trips[-1][1], event)
            pending = []
    return list(reversed(trips))


def led_by(failures: list[Event]) -> str:
    """`payments timeout ×3, crm http_401 ×2 (00:01:02–00:04:24)`: what led to a trip."""
    groups: dict[tuple[str, str], int] = {}
    for failure in failures:
        what = (str(failure.fields.get("platform")), str(failure.fields.get("fault")))
        groups[what] = groups.get(what, 0) + 1
    kinds = ", ".join(f"{platform} {fault} ×{n}" for (platform, fault), n in groups.items())
    first, last = clock_text(failures[0].wall), clock_text(failures[-1].wall)
    when = first if first == last else f"{first}–{last}"
    return f"{kinds} ({when})"


class DetailScreen(SteerActions, Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "app.pop_screen", "Back", id="back"),
        Binding("r", "reset", "Reset", id="detail-reset"),
        Binding("f", "fix", "Cred fixed", id="detail-fix"),
        Binding("h", "hide_denied", "Hide denied", id="detail-hide-denied"),
        *steer_bindings("detail-"),
        Binding("e", "export", "Export", show=False, id="detail-export", tooltip=EXPORT_TIP),
        Binding("j", "cursor(1)", "Down", show=False, id="detail-down"),
        Binding("k", "cursor(-1)", "Up", show=False, id="detail-up"),
        Binding("question_mark", "app.help", "Help", id="detail-help"),
        Binding("q", "app.quit", "Quit", id="detail-quit"),
    ]

    def __init__(self, card: Card) -> None:
        super().__init__(id="detail")
        self.card = card
        self.rows: list[Event] = []
        self.trip_rows: list[Event] = []
        #: `h`: the audit table without `call.denied` rows (a flood of them hides the rest).
        self.hide_denied = False

    @property
    def deck(self) -> Deck:
        """The app, as far as this screen reads it (it posts messages for everything else)."""
        return cast(Deck, self.app)

    def compose(self) -> ComposeResult:
        yield Static(id="detail-title")
        yield Static(id="detail-hint", markup=False)
        yield Static(id="detail-timeline", markup=False)
        yield Static(id="detail-trips", markup=False)
        yield Static(id="detail-note", markup=False)
        yield DataTable(id="audit", cursor_type="row", zebra_stripes=False)
        yield Footer(show_command_palette=False)

    async def on_mount(self) -> None:
        table = self.query_one(DataTable)
        columns = [("seq", 6), ("time", 8), ("event", 14)]
        if self.deck.board.thresholds.kind == "tool":  # under `agent`, the key is the agent
            columns.append(("agent", 12))
        # Fixed widths, the details taking what is left: cut with an ellipsis at 80 columns
        # rather than run off the screen's edge (the table does not scroll sideways).
        used = sum(width + 2 for _, width in columns) + 2 + 1  # cell padding, scrollbar
        columns.append(("details", max(20, self.app.size.width - used)))
        for name, width in columns:
            table.add_column(name, key=name, width=width)
        table.focus()
        await self.reload()

    # -- data --------------------------------------------------------------------------------

    async def reload(self) -> None:
        """Fresh card and audit rows (the key changed, or the screen opened)."""
        fresh = self.deck.board.card(self.card.ident)
        if fresh is not None:
            self.card = fresh
        self.rows = await self.deck.source.audit(self.card.id, AUDIT_ROWS)
        self.trip_rows = await self.deck.source.trip_history(self.card.id)
        note = self.deck.source.audit_note(self.card.id)
        shown = self.query_one("#detail-note", Static)
        shown.display = note is not None
        shown.update(printable(note or ""))
        self._show_card()
        self._show_timeline()
        self._show_trips()
        self._show_rows()
        self.refresh_bindings()

    def _show_card(self) -> None:
        card = self.card
        title = Text(no_wrap=True, overflow="ellipsis")
        title.append(f" {card.state_words()} ", style="bold reverse")
        now = self.deck.now_for(card.id)
        left = card.seconds_left(now) if card.state == State.OPEN else card.hold_left(now)
        if left is not None:
            title.append(f" {countdown_words(mmss(left), card.state)}", style="bold")
        title.append(f"  {printable(card.agent)}", style="bold")
        if card.key != card.agent:
            title.append(f" · {printable(card.key)}")
        if card.source:
            title.append(f" on {printable(card.source)}")
        stale = self.deck.fleet.stale_for(card.id)
        if stale is not None:
            title.append(f"  STALE since {clock_text(stale)}", style="bold reverse")
        if card.shared:
            title.append(f" (shared: {printable(', '.join(card.view.agents))})")
        if card.rank == 0:
            title.append("  ")
            title.append(" PAGED ", style="bold reverse")
        limits = card.limits or self.deck.board.thresholds
        approximate = self.deck.source.approximate_counts
        title.append(f"   {limits.counter(card.view.count, approximate=approximate)}")
        self.query_one("#detail-title", Static).update(title)
        said = [f"→ {hint(card)}"]
        if card.state == State.HELD:  # who, until when and why, as typed
            said.append(f"  {card.held_words(now)}")
        self.query_one("#detail-hint", Static).update("\n".join(map(printable, said)))

    def _show_timeline(self) -> None:
        """The whole of the last episode, from its trip to its end (or now), one line of
        cells across the screen, its times under it and what each glyph means."""
        card = self.card
        now = self.deck.now_for(card.id)
        cells = max(10, self.app.size.width - 4)
        shown = episode(card.timeline, now)
        if shown is None:
            step = CARD_STEP
            start = now - step * cells
            title = f"Timeline, the last {span_text(step * cells)}: never left closed"
        else:
            first, last = shown
            step = fit_step(last - first, cells - 2)
            start = first - step  # a cell of what came before
            cells = min(cells, int((last - start) // step) + 2)
            ongoing = "so far" if last >= now else f"to {clock_text(last)}"
            title = (
                f"Timeline, the last episode: {clock_text(first)} {ongoing} "
                f"({span_text(last - first)}; a cell is {span_text(step)})"
            )
        # Two lines, so the audit table keeps its rows at 80x24; the legend where it fits
        # (the help has it too).
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(title, style="bold")
        legend = "  ".join(f"{glyph} {word}" for glyph, word in LEGEND)
        if len(title) + 4 + len(legend) <= self.app.size.width - 2:
            text.append("   " + legend, style="dim")
        text.append("\n")
        for cell in strip(card.timeline, card.marks, start=start, step=step, count=cells):
            text.append(cell.glyph, style=_cell_style(cell.kind))
        self.query_one("#detail-timeline", Static).update(text)

    def _show_trips(self) -> None:
        trips = trips_with_failures(self.trip_rows)
        if not trips:
            text = "Trips: none in the audit log"
        else:
            lines = ["Trips, newest first, with the counted failures that led to each:"]
            for trip, failures, ended in trips[:3]:
                f = trip.fields
                end = (
                    "still open"
                    if ended is None
                    else (
                        "recovered"
                        if ended.type == ev.RECOVERED
                        else f"reset by {ended.fields.get('actor')} ({ended.fields.get('reason')})"
                    )
                )
                lines.append(
                    f"  {clock_text(trip.wall)} {cause_word(f.get('failure_class'))} "
                    f"×{f.get('count')} → {end}"
                )
                if failures:
                    lines.append(f"    after: {led_by(failures)}")
            if len(trips) > 3:
                lines.append(f"  +{len(trips) - 3} earlier trips (the audit log below has them)")
            text = "\n".join(printable(line) for line in lines)
        self.query_one("#detail-trips", Static).update(text)

    def _show_rows(self) -> None:
        table = self.query_one(DataTable)
        cursor = table.cursor_row
        table.clear()
        with_agent = self.deck.board.thresholds.kind == "tool"
        rows = [e for e in self.rows if not (self.hide_denied and e.type == ev.CALL_DENIED)]
        for event in rows:
            cells = [str(event.seq), clock_text(event.wall), short_type(event.type)]
            if with_agent:
                cells.append(event.agent or "")
            cells.append(describe(event))
            # Text cells: a string cell would be read as Rich markup, and `[/]` in a reason
            # would crash the screen.
            shown = (Text(printable(cell), no_wrap=True, overflow="ellipsis") for cell in cells)
            table.add_row(*shown, key=str(event.seq))
        if rows:
            table.move_cursor(row=min(cursor, len(rows) - 1))

    def tick(self) -> None:
        if self.card.state in (State.OPEN, State.HELD):  # their countdowns
            self._show_card()
        if self.card.state != State.CLOSED:
            self._show_timeline()  # an episode under way grows with the clock

    # -- keys --------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[Any, ...]) -> bool | None:
        if action == "reset":
            return self.deck.reset_offer(self.card)
        if action == "fix":
            return self.deck.fix_offer(self.card)
        if action in STEERS:
            return self.deck.steer_offer(action, self.card)
        return True

    def action_hide_denied(self) -> None:
        self.hide_denied = not self.hide_denied
        self._show_rows()

    def action_cursor(self, delta: int) -> None:
        table = self.query_one(DataTable)
        table.move_cursor(row=max(0, table.cursor_row + delta))

    def action_reset(self) -> None:
        self.post_message(ResetRequested(self.card))

    def action_fix(self) -> None:
        self.post_message(FixRequested(self.card))

    def action_export(self) -> None:
        self.post_message(ExportRequested(self.card))

    def steer_card(self) -> Card | None:
        return self.card


def _cell_style(kind: str) -> str:
    """A timeline cell in the detail view: its state's colour, never reversed (the glyph says
    it); a mark bold; nothing known yet plain."""
    if kind == "unknown":
        return ""
    look = BY_NAME.get(kind)
    return "bold" if look is None else look.cell
