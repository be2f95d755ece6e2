"""What screens ask of the app, and what they may read from it.

Screens never call up into `console.app` (that was the console's only import circle): they post
one of these messages, which bubbles to the app, and the app runs the workflow (dialogs, the
writes, the toasts). What a screen needs to draw and to offer keys it reads through `Deck`,
which the app satisfies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from textual.message import Message

from breakerdeck.console.board import Board
from breakerdeck.console.card import Card
from breakerdeck.console.filters import Filter

if TYPE_CHECKING:
    from breakerdeck.console.pulse import PulseRow, TabTitle
    from breakerdeck.console.source import FaultControls, Fleet, SharedStores, Source


class Deck(Protocol):
    """The app as a screen sees it: data to draw, and which writes a card offers. What a
    breaker is read from is the tab shown's (one per context, else the only one)."""

    controls: FaultControls | None

    @property
    def board(self) -> Board: ...

    @property
    def source(self) -> Source: ...

    @property
    def fleet(self) -> Fleet: ...

    @property
    def stores(self) -> SharedStores | None: ...

    def tab_titles(self) -> list[TabTitle]:
        """Every tab as its bar names it; none when there is only one."""
        ...

    def context_title(self) -> TabTitle | None:
        """The context shown, for the header (None: the console watches no context)."""
        ...

    def pulse_rows(self) -> list[PulseRow]: ...

    def now(self) -> float:
        """The header's clock, read once per frame."""
        ...

    def now_for(self, ident: str) -> float:
        """The clock this breaker's countdown runs on, read once per frame: every screen and
        dialog shows the same countdown."""
        ...

    def store_lost(self) -> list[tuple[str | None, str]]:
        """The engines whose shared store is lost (none where the source has no stores)."""
        ...

    def active_filter(self) -> Filter:
        """The dashboard's filter (`/`, a saved view): the table keeps the same breakers."""
        ...

    def player_status(self) -> str | None:
        """A replay's state and keys for the status line (None: not a replay)."""
        ...

    def reset_offer(self, card: Card | None) -> bool | None: ...

    def steer_offer(self, what: str, card: Card | None) -> bool | None:
        """`hold`, `release` or `mode` on this card (the same gate as `reset_offer`)."""
        ...

    def enforce_offer(self, cards: list[Card]) -> bool | None:
        """`M`: whether any of the breakers shown is a shadow one `m` could switch."""
        ...

    def fix_offer(self, card: Card | None) -> bool | None: ...

    def fault_offer(self) -> bool: ...

    def reset_targets(self, card: Card) -> list[Card]: ...

    def can_fix(self, card: Card) -> bool: ...

    def fixed(self, card: Card) -> bool: ...


class CardMessage(Message):
    """A request about one card (the one selected, or shown in details)."""

    def __init__(self, card: Card) -> None:
        super().__init__()
        self.card = card


class DetailsRequested(CardMessage):
    """Open the card's detail screen."""


class TableRequested(Message):
    """Show every breaker as a row of a table (`t`)."""


class ContextRequested(Message):
    """Show a context's tab (`enter` on the pulse): `index` counts from 0."""

    def __init__(self, index: int) -> None:
        super().__init__()
        self.index = index


class ResetRequested(CardMessage):
    """Ask to reset the card's breaker (`every`: on every source reporting its key)."""

    def __init__(self, card: Card, *, every: bool = False) -> None:
        super().__init__(card)
        self.every = every


class SteerRequested(CardMessage):
    """Ask to hold the card's breaker, release it or switch its mode (`what`: `hold`,
    `release` or `mode`)."""

    def __init__(self, card: Card, what: str) -> None:
        super().__init__(card)
        self.what = what


class EnforceShownRequested(Message):
    """Switch every shadow breaker among `cards` (those shown) to enforce (`M`)."""

    def __init__(self, cards: list[Card]) -> None:
        super().__init__()
        self.cards = cards


class ExportRequested(CardMessage):
    """Export the card's incident (`e`): Markdown and JSON, to files or a browser download."""


class FixRequested(CardMessage):
    """Ask to mark the card's credential fixed."""


class DemoFaultRequested(Message):
    """Demo mode: take a platform down, bring it back, or revoke its credential."""

    def __init__(self, what: str, card: Card | None) -> None:
        super().__init__()
        self.what = what
        self.card = card
