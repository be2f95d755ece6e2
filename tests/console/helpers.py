"""Reading what the console shows, as plain text."""

from __future__ import annotations

from textual.widgets import Static

from breakerdeck.console.widgets.bars import StatusLine, SummaryBar
from breakerdeck.console.widgets.cards import CardList


def cards_text(app) -> str:
    """Every line the card list draws right now (only the visible ones exist)."""
    cards = app.screen.query_one(CardList)
    return "\n".join(cards.render_line(y).text for y in range(cards.size.height))


def header_text(app) -> str:
    return str(app.screen.query_one(SummaryBar).content)


def status_text(app) -> str:
    return str(app.screen.query_one(StatusLine).content)


def static_text(screen, selector: str) -> str:
    return str(screen.query_one(selector, Static).content)
