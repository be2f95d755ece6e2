"""The live event log, beside or under the cards where the terminal has room: transitions,
probes, resets with who, pages, newest first, filtered like the cards.

One `ScrollView` drawing only its visible rows (the Line API, as the cards are), under a title
line that says what it holds and how much the filter keeps.
"""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Static

from breakerdeck.console.log_rows import LogRow
from breakerdeck.console.states import BY_NAME, component_classes, state_css
from breakerdeck.console.words import clock_text
from breakerdeck.engine.text import printable

KIND_WIDTH = 8  # "RECOVER" and "RESTORE", then a space
NAME_WIDTH = 18
#: Narrower than this (a log beside the cards at 120 columns), a row takes two lines: the
#: time, word and name, then what happened under them.
ONE_LINE_WIDTH = 64


class LogLines(ScrollView):
    """The rows, newest first; only the visible ones are drawn."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "log--time",
        "log--other",
        "log--empty",
        *component_classes("log"),
    }

    DEFAULT_CSS = (
        "LogLines { height: 1fr; overflow-x: hidden; scrollbar-size-vertical: 1; }\n"
        + state_css("LogLines", "log")
    )

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[LogRow] = []
        self.empty_text = "nothing yet: trips, probes, resets and pages appear here"
        self._cache: dict[tuple[int, str, str, int, int], Strip] = {}

    @property
    def lines_per_row(self) -> int:
        width = self.scrollable_content_region.width or self.size.width
        return 1 if width >= ONE_LINE_WIDTH else 2

    def set_rows(self, rows: list[LogRow]) -> None:
        self.rows = rows
        self.virtual_size = Size(self.size.width, max(1, len(rows) * self.lines_per_row))
        if len(self._cache) > 4096:
            self._cache.clear()
        self.refresh()

    def on_resize(self) -> None:
        self.set_rows(self.rows)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width or self.size.width
        base = self.rich_style
        index, part = divmod(y + int(self.scroll_offset.y), self.lines_per_row)
        if not self.rows:
            if y == 0:
                style = self.get_component_rich_style("log--empty")
                return Strip([Segment(self.empty_text, style)]).crop_extend(0, width, base)
            return Strip.blank(width, base)
        if index >= len(self.rows):
            return Strip.blank(width, base)
        row = self.rows[index]
        key = (row.seq, row.kind, row.ident, width, part)
        cached = self._cache.get(key)
        if cached is None:
            cached = self._cache[key] = self._draw(row, width, base, part)
        return cached

    def _draw(self, row: LogRow, width: int, base: Style, part: int) -> Strip:
        look = BY_NAME.get(row.state or "")
        kind = "log--other" if look is None else f"log--{look.css}"
        kind_style = self.get_component_rich_style(kind)
        name = printable(row.name)
        if len(name) > NAME_WIDTH:
            name = name[: NAME_WIDTH - 1] + "…"
        text = Segment(printable(row.text))
        segments = [
            Segment(clock_text(row.wall) + " ", self.get_component_rich_style("log--time")),
            # bold words, never reversed: the word itself says what happened
            Segment(f"{row.kind:<{KIND_WIDTH}}", kind_style + Style(bold=True, reverse=False)),
            Segment(f"{name:<{NAME_WIDTH}} "),
        ]
        if self.lines_per_row == 1:
            segments.append(text)
        elif part == 1:
            segments = [Segment("  "), text]
        strip = Strip(segments)
        if strip.cell_length > width:
            strip = Strip.join([strip.crop(0, width - 1), Strip([Segment("…")])])
        return strip.extend_cell_length(width, base).apply_style(base)


class EventLog(Vertical):
    """The title line and the rows."""

    DEFAULT_CSS = """
    EventLog { height: 1fr; }
    EventLog > #log-title { height: 1; }
    """

    _shown: tuple[int, int, str] | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="log-title", markup=False)
        yield LogLines(id="log-lines")

    def show(self, rows: list[LogRow], total: int, filter_text: str, version: int) -> None:
        """The rows the filter kept, of `total`; redrawn only when they or the filter changed."""
        if self._shown == (version, total, filter_text):
            return
        self._shown = (version, total, filter_text)
        title = Text("events, newest first", style="bold", no_wrap=True, overflow="ellipsis")
        if filter_text:
            title.append(f"  filter “{printable(filter_text)}”: {len(rows)} of {total}")
        self.query_one("#log-title", Static).update(title)
        self.query_one(LogLines).set_rows(rows)
