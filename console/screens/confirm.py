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
        live: Callable[[list[str]], list[str]] | None = None,
    ) -> None:
        super().__init__(id="confirm")
        self.title_text = title
        self.lines = lines
        self.warning = warning
        self.yes = yes
        #: Redraws the lines each tick (a countdown in them), so the dialog is never frozen.
        self.live = live

    def compose(self) -> ComposeResult:
        # Keys, agents, sources and causes come from outside: shown escaped, never as markup.
        with Vertical(id="confirm-box"):
            yield Static(printable(self.title_text), id="confirm-title", markup=False)
            yield Static(self._body(), id="confirm-body", markup=False)
            if self.warning:
                warning = f"WARNING: {printable(self.warning)}"
                yield Static(warning, id="confirm-warning", markup=False)
            with Horizontal(id="confirm-buttons"):
                yield Button("No (n)", id="no", variant="primary")
                yield Button(f"{self.yes} (y)", id="yes", variant="error")
            yield Static("y confirms · n or escape cancels", id="confirm-keys")
        yield Footer(
            show_command_palette=False
        )  # this dialog's keys, not the dashboard's beneath it

    def _body(self) -> str:
        return "\n".join(printable(line) for line in self.lines)

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def tick(self) -> None:
        if self.live is None:
            return
        lines = self.live(self.lines)
        if lines != self.lines:
            self.lines = lines
            self.query_one("#confirm-body", Static).update(self._body())

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")
