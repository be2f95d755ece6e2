"""`p`: the pulse, every context in one table (k9s's `:pulses`): its open, half-open, held,
shadow and paused breakers, the calls refused in the last minute, and the countdown that ends
first. `enter` (or a context's number) shows that context.

Each row is two lines: the numbers beside the context's name, and under the name what to know
before trusting them (read-only, STALE), under the countdown whose it is. So every column fits
80 columns and the row still says it all without colour.
"""

from __future__ import annotations

from typing import ClassVar, cast

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from breakerdeck.console.messages import ContextRequested, Deck
from breakerdeck.console.pulse import COLUMNS, PulseRow, column_word
from breakerdeck.console.states import BY_NAME
from breakerdeck.console.widgets.tabs import name_style
from breakerdeck.console.words import clock_text, mmss
from breakerdeck.engine.text import printable

#: A context's name in its cell, at most (its whole name is on the line under the table).
NAME_CHARS = 12
#: The key under a countdown, at most.
KEY_CHARS = 10

_REFUSED, _ENDS = "refused/min", "probe in"


class PulseScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("p,escape", "app.pop_screen", "Back", id="pulse-back"),
        # Before the table's own enter, so that the footer offers it.
        Binding("enter", "show", "Show", id="pulse-show", priority=True),
        Binding("question_mark", "app.help", "Help", id="pulse-help"),
        Binding("q", "app.quit", "Quit", id="pulse-quit"),
    ]

    def __init__(self) -> None:
        super().__init__(id="pulse")
        self.rows: list[PulseRow] = []

    @property
    def deck(self) -> Deck:
        return cast(Deck, self.app)

    def compose(self) -> ComposeResult:
        yield Static(id="pulse-title")
        yield DataTable(id="pulse-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="pulse-where")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_column("context", key="context")
        for name, mode in COLUMNS:
            table.add_column(column_word(name, mode), key=name)
        table.add_column(_REFUSED, key=_REFUSED)
        table.add_column(_ENDS, key=_ENDS)
        table.focus()
        self.tabs_changed()

    # -- data --------------------------------------------------------------------------------

    def tabs_changed(self) -> None:
        if not self.query(DataTable):  # torn down (the app is exiting)
            return
        rows = self.deck.pulse_rows()
        table = self.query_one(DataTable)
        at = table.cursor_row
        no_color = self.app.no_color
        with self.app.batch_update():
            table.clear()
            for row in rows:
                table.add_row(*_cells(row, no_color), height=2, key=str(row.number))
            table.move_cursor(row=min(max(at, 0), len(rows) - 1))
        self.rows = rows
        title = Text(no_wrap=True, overflow="ellipsis")
        title.append("Pulse", "bold")
        title.append(f": {len(rows)} contexts · enter shows one · {clock_text(self.deck.now())}")
        self.query_one("#pulse-title", Static).update(title)
        self._show_where()

    def tick(self) -> None:
        """Countdowns run and a minute's refusals pass: the rows are drawn again."""
        self.tabs_changed()

    @on(DataTable.RowHighlighted)
    def _show_where(self) -> None:
        row = self.selected
        text = Text(no_wrap=True, overflow="ellipsis")
        if row is not None:
            text.append(printable(row.name), name_style(row.color, self.app.no_color))
            text.append(f": {printable(row.where)}")
            if row.stale_since is not None:
                text.append(f"  STALE since {clock_text(row.stale_since)}", "bold reverse")
        self.query_one("#pulse-where", Static).update(text)

    @property
    def selected(self) -> PulseRow | None:
        table = self.query_one(DataTable)
        at = table.cursor_row
        return self.rows[at] if 0 <= at < len(self.rows) else None

    # -- keys --------------------------------------------------------------------------------

    def action_show(self) -> None:
        row = self.selected
        if row is not None:
            self.post_message(ContextRequested(row.number - 1))

    @on(DataTable.RowSelected)
    def _chosen(self) -> None:
        self.action_show()


def _cells(row: PulseRow, no_color: bool) -> list[Text]:
    name = printable(row.name)
    if len(name) > NAME_CHARS:
        name = name[: NAME_CHARS - 1] + "…"
    context = Text(no_wrap=True)
    context.append(f"{row.number} ")
    context.append(name, name_style(row.color, no_color))
    stale = row.stale_since is not None
    marks = [word for word, on in (("read-only", row.read_only), ("STALE", stale)) if on]
    if marks:
        context.append("\n" + " ".join(marks), "bold")
    cells = [context]
    for (name_, _), count in zip(COLUMNS, row.counts, strict=True):
        look = BY_NAME.get(name_)
        style = ""
        if look is not None and count:
            # As the header does: trouble reversed where there is no colour (a red count
            # would be the faintest grey).
            style = "bold reverse" if no_color and look.loud else look.label
        cells.append(Text(str(count), style=style))
    cells.append(Text(str(row.refused_per_minute)))
    ends = Text(no_wrap=True)
    if row.next_end is not None:
        left, key = row.next_end
        key = printable(key)
        ends.append(mmss(left))
        ends.append("\n" + (key if len(key) <= KEY_CHARS else key[: KEY_CHARS - 1] + "…"), "dim")
    cells.append(ends)
    return cells
