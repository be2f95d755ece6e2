"""The contexts' tabs (`watch --context A --context B`): one line, each tab's number (the key
that shows it), name, and its OPEN and HELD counts; the tab shown is drawn reversed, so it
reads without colour. A custom line rather than Textual's `Tabs`, which takes two rows (the
tabs and their underline): at 80x24 that row is a card's."""

from __future__ import annotations

from collections.abc import Sequence

from rich.style import Style
from rich.text import Text
from textual.widgets import Static

from breakerdeck.console.pulse import TabTitle
from breakerdeck.console.states import HELD, word_for
from breakerdeck.engine.text import printable

#: A name longer than this is cut when every tab's whole name does not fit.
SHORT_NAME = 10


def name_style(color: str | None, no_color: bool) -> Style:
    """A context's name: bold, in its colour where colours are shown. Under NO_COLOR a colour
    turns to a grey, and red is the darkest of them (unreadable on the bars' grey): the name
    says it alone there."""
    return Style(bold=True, color=None if no_color else color)


class ContextTabs(Static):
    DEFAULT_CSS = """
    ContextTabs { height: 1; width: 1fr; }
    """

    _shown: Text | None = None

    def show(self, titles: Sequence[TabTitle]) -> None:
        self.display = bool(titles)
        width = self.size.width or self.app.size.width
        no_color = self.app.no_color
        text = _line(titles, None, no_color)
        if text.cell_len > width:
            text = _line(titles, SHORT_NAME, no_color)
        text.truncate(width, overflow="ellipsis")
        if text != self._shown:
            self._shown = text
            self.update(text)


def _line(titles: Sequence[TabTitle], cut: int | None, no_color: bool) -> Text:
    opened, held = word_for("open"), word_for(HELD)
    text = Text(no_wrap=True)
    for n, title in enumerate(titles):
        if n:
            text.append(" ")
        name = printable(title.name)  # from contexts.toml: outside text
        if cut is not None and len(name) > cut:
            name = name[: cut - 1] + "…"
        base = Style(bold=True, reverse=True) if title.active else Style()
        text.append(f" {title.number} ", base)
        text.append(name, base + name_style(title.color, no_color))
        text.append(f" {opened} {title.open} {held} {title.held} ", base)
        if title.stale:
            text.append("STALE ", base + Style(bold=True, reverse=not title.active))
    return text
