"""Confirmation for operator writes: a `ModalScreen[bool]` with No focused; y / n / escape."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Static

from breakerdeck.engine.text import printable

#: Redraws a dialog's lines as the clock moves (a countdown in them).
Live = Callable[[list[str]], list[str]]


class DialogWords(Vertical):
    """A dialog's title, lines and warning (`<prefix>-title`, `-body`, `-warning`): keys,
    agents, sources, causes and reasons come from outside, so all are shown escaped, never as
    markup. `live` redraws the lines each tick, so the dialog is never frozen."""

    DEFAULT_CSS = "DialogWords { height: auto; }"

    def __init__(
        self, prefix: str, title: str, lines: list[str], warning: str | None, live: Live | None
    ) -> None:
        super().__init__()
        self.prefix, self.title_text, self.lines = prefix, title, lines
        self.warning, self.live = warning, live

    def compose(self) -> ComposeResult:
        prefix = self.prefix
        yield Static(printable(self.title_text), id=f"{prefix}-title", markup=False)
        yield Static(self._body(), id=f"{prefix}-body", markup=False)
        if self.warning:
            warning = f"WARNING: {printable(self.warning)}"
            yield Static(warning, id=f"{prefix}-warning", markup=False)

    def _body(self) -> str:
        return "\n".join(printable(line) for line in self.lines)

    def tick(self) -> None:
        if self.live is None:
            return
        lines = self.live(self.lines)
        if lines != self.lines:
            self.lines = lines
            self.query_one(f"#{self.prefix}-body", Static).update(self._body())


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes", id="confirm-yes"),
        Binding("n", "answer(False)", "No", id="confirm-no"),
        Binding("escape", "answer(False)", "Cancel", id="confirm-cancel"),
        Binding("left,right,tab,shift+tab", "app.focus_next", "Switch", show=False),
    ]

    def __init__(
        self,
        title: str,
        lines: list[str],
        *,
        warning: str | None = None,
        yes: str = "Yes",
        live: Live | None = None,
    ) -> None:
        super().__init__(id="confirm")
        self.title_text = title
        self.lines = lines
        self.warning = warning
        self.yes = yes
        #: Redraws the lines each tick (a countdown in them), so the dialog is never frozen.
        self.live = live

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box"):
            yield DialogWords("confirm", self.title_text, self.lines, self.warning, self.live)
            with Horizontal(id="confirm-buttons"):
                yield Button("No (n)", id="no", variant="primary")
                yield Button(f"{self.yes} (y)", id="yes", variant="error")
            yield Static("y confirms · n or escape cancels", id="confirm-keys")
        yield Footer(
            show_command_palette=False
        )  # this dialog's keys, not the dashboard's beneath it

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def tick(self) -> None:
        self.query_one(DialogWords).tick()

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")
