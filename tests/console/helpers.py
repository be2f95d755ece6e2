"""Reading what the console shows, as plain text."""

from __future__ import annotations

from textual.widgets import Static

from breakerdeck.console.widgets.bars import StatusLine, SummaryBar
from breakerdeck.console.widgets.cards import CardList


def cards_text(app) -> str:
    """Every line the card list draws right now (only the visible ones exist)."""
    cards = app.screen.query_one(CardList)
    return "\n".join(cards.render_line(y).text for y in range(cards.size.height))


def card_agents(app) -> list[str]:
    """The agents of the dashboard's cards, in the order they are listed."""
    return [card.agent for card in app.screen.query_one(CardList).cards]


def header_text(app) -> str:
    return str(app.screen.query_one(SummaryBar).content)


def status_text(app) -> str:
    return str(app.screen.query_one(StatusLine).content)


def static_text(screen, selector: str) -> str:
    return str(screen.query_one(selector, Static).content)


def screen_text(app) -> str:
    """The screen as the terminal has it now: what the compositor last drew, without asking
    any widget to draw afresh (a line nobody refreshed still reads as it did)."""
    update = app.screen._compositor.render_update(full=True)
    return "\n".join("".join(seg.text for strip in line for seg in strip) for line in update.strips)


def countdown_of(text: str, name: str) -> str | None:
    """The countdown on the title line of `name`'s open card (`probe in 04:28`), or None."""
    for line in text.splitlines():
        words = line.split()
        if "OPEN" in words and name in words and "probe" in words:
            return words[words.index("probe") + 2]
    return None
