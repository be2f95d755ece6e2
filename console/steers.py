"""Where each of the operator's hold, release and mode switch applies (`o`, `O`, `m`): one
table the screens' `check_action` and the app's gate (`OperatorActions.write_offer`) read; and
`M`, every shadow breaker shown switched to enforce (a shadow rollout's end) on the screens
that list breakers."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from textual.binding import Binding
from textual.message_pump import MessagePump

from breakerdeck.console.card import Card
from breakerdeck.console.messages import EnforceShownRequested, SteerRequested
from breakerdeck.engine.state import State

STEERS: dict[str, Callable[[Card], bool]] = {
    "hold": lambda card: card.state != State.HELD,  # a held breaker is released, not held
    "release": lambda card: card.state == State.HELD,
    "mode": lambda card: True,
}


def steer_bindings(prefix: str = "") -> list[Binding]:
    """`o`, `O` and `m` on a screen that shows a breaker (ids `<prefix>hold`, …). Not in the
    footer (at 80 columns it is full): the help, the palette and a held card's hint name them."""
    return [
        Binding("o", "hold", "Hold", show=False, id=f"{prefix}hold", tooltip="hold it open"),
        Binding(
            "O", "release", "Release", show=False, id=f"{prefix}release", tooltip="end its hold"
        ),
        Binding("m", "mode", "Mode", show=False, id=f"{prefix}mode", tooltip="shadow or enforce"),
    ]


def enforce_shown_binding(prefix: str = "") -> Binding:
    """`M` on a screen that lists breakers (the dashboard, the table): not in the footer, the
    help and the palette name it."""
    return Binding(
        "M",
        "enforce_shown",
        "Enforce all shown",
        show=False,
        id=f"{prefix}enforce-shown",
        tooltip="switch every shadow breaker shown to enforce",
    )


class SteerActions:
    """The actions of `steer_bindings` for a screen that shows a breaker (`steer_card`): each
    posts a `SteerRequested`, and the app runs the dialog."""

    def steer_card(self) -> Card | None:
        """The breaker the keys act on, or None (none is selected, or it is off screen)."""
        raise NotImplementedError

    def action_hold(self) -> None:
        self._steer("hold")

    def action_release(self) -> None:
        self._steer("release")

    def action_mode(self) -> None:
        self._steer("mode")

    def _steer(self, what: str) -> None:
        card = self.steer_card()
        if card is not None:
            cast(MessagePump, self).post_message(SteerRequested(card, what))


class EnforceShownAction:
    """The action of `enforce_shown_binding` for a screen that lists breakers (`shown_cards`:
    those its filter keeps): it posts an `EnforceShownRequested`, and the app runs the dialog."""

    def shown_cards(self) -> list[Card]:
        raise NotImplementedError

    def action_enforce_shown(self) -> None:
        cast(MessagePump, self).post_message(EnforceShownRequested(self.shown_cards()))
