"""The command palette's saved views and contexts (`ctrl+p`, Textual's `Provider` API).

A view is a filter string (`open`, `held` and `probing` built in, others from `views.toml`):
choosing one sets the dashboard's `/` filter to it. Watching contexts, each one's tab is a
command too. Names and filters come from the user's files: Textual reads a hit's help, and
the text its matcher highlights, as markup, so both are built here from plain text instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Protocol, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content
from textual.fuzzy import Matcher
from textual.markup import escape

from breakerdeck.console.contexts import View
from breakerdeck.engine.text import printable


class _Console(Protocol):
    """The app, as far as the palette's commands reach."""

    views: Mapping[str, View]

    def apply_view(self, name: str) -> None: ...

    def context_names(self) -> list[str]: ...

    def show_tab(self, index: int) -> None: ...


class ViewCommands(Provider):
    def _commands(self) -> list[tuple[str, Callable[[], None], str]]:
        """(what the palette lists, what choosing it does, its help line)."""
        console = cast(_Console, self.app)
        commands: list[tuple[str, Callable[[], None], str]] = [
            (f"view: {name}", partial(console.apply_view, name), f"filter: {view.filter}")
            for name, view in console.views.items()
        ]
        commands += [
            (f"context: {name}", partial(console.show_tab, n), f"show its tab ({n + 1})")
            for n, name in enumerate(console.context_names())
        ]
        return [(printable(shown), run, printable(help)) for shown, run, help in commands]

    async def discover(self) -> Hits:
        for shown, run, help in self._commands():
            yield DiscoveryHit(Content(shown), run, help=escape(help))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for shown, run, help in self._commands():
            score = matcher.match(shown)
            if score > 0:
                yield Hit(score, _highlighted(matcher, shown), run, help=escape(help))


def _highlighted(matcher: Matcher, text: str) -> Content:
    """`text` with the characters the query matched marked, never read as markup (Textual's
    `Matcher.highlight` parses its candidate as markup)."""
    content = Content(text)
    _, offsets = matcher.fuzzy_search.match(matcher.query, text)
    for offset in offsets:
        content = content.stylize(matcher.match_style, offset, offset + 1)
    return content
