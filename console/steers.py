"""Where each of the operator's hold, release and mode switch applies (`o`, `O`, `m`): one
table the screens' `check_action` and the app's gate (`OperatorActions.write_offer`) read."""

from __future__ import annotations

from collections.abc import Callable

from breakerdeck.console.card import Card
from breakerdeck.engine.state import State

STEERS: dict[str, Callable[[Card], bool]] = {
    "hold": lambda card: card.state != State.HELD,  # a held breaker is released, not held
    "release": lambda card: card.state == State.HELD,
    "mode": lambda card: True,
}
