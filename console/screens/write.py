"""The dialog of an operator write that takes words: hold (a reason and a duration), release
(a reason, and closed instead of half-open) and mode (a reason). No is focused, as in every
confirmation; what the operator typed is checked and sent from here, and a refusal (a bad
duration, a hold past the engine's bound, the engine's own `not_held`) is said in the dialog,
which stays open with what was typed, rather than in a toast after it closed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Input, Static

from breakerdeck.console.screens.confirm import DialogWords, Live
from breakerdeck.engine.core.holds import MAX_REASON
from breakerdeck.engine.text import printable


@dataclass(frozen=True, slots=True)
class Answer:
    """What the operator typed and chose."""

    reason: str
    duration: str = ""
    close: bool = False


@dataclass(frozen=True, slots=True)
class WriteForm:
    """One write's dialog: its words, which fields it asks for, and what `y` sends."""

    title: str
    lines: list[str]
    #: The confirming button's word (`Hold`, `Release`, `Switch`).
    yes: str
    #: Sends the answer; raises with the words to show when it is refused (nothing changed).
    send: Callable[[Answer], Awaitable[None]]
    reason_hint: str = "reason (optional)"
    #: A hold asks how long (`30m`), with this placeholder.
    duration_hint: str | None = None
    #: A release offers to end closed instead of half-open (`c` switches): how the choice
    #: reads each way, in words (a check box's mark is only dimmed without colour).
    close_choice: tuple[str, str] | None = None
    warning: str | None = None
    #: Redraws the lines each tick (a hold's time left in them), so the dialog never freezes.
    live: Live | None = None


class WriteScreen(ModalScreen[bool]):
    """Dismissed with True once the write was sent and taken, False when cancelled."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # `y` and `n` act where no field takes the letter (on the buttons, No first).
        Binding("y", "send", "Yes", id="write-yes"),
        Binding("n", "cancel", "No", id="write-no"),
        Binding("escape", "cancel", "Cancel", id="write-cancel"),
        Binding("c", "toggle_close", "Closed", show=False, id="write-close"),
    ]

    def __init__(self, form: WriteForm) -> None:
        super().__init__(id="write")
        self.form = form
        self._sending = False
        self.close = False

    def compose(self) -> ComposeResult:
        form = self.form
        with Vertical(id="write-box"):
            yield DialogWords("write", form.title, form.lines, form.warning, form.live)
            yield Input(placeholder=form.reason_hint, id="write-reason", max_length=MAX_REASON)
            if form.duration_hint is not None:
                yield Input(placeholder=form.duration_hint, id="write-duration", max_length=16)
            if form.close_choice is not None:
                yield Static(form.close_choice[0], id="write-closed", markup=False)
            yield Static("", id="write-error", markup=False)
            with Horizontal(id="write-buttons"):
                yield Button("No (n)", id="no", variant="primary")
                # Reached by `y`, never by tab: the fields and No are the focus chain, so
                # tab from No comes back round to the reason.
                yes = Button(f"{form.yes} (y)", id="yes", variant="error")
                yes.can_focus = False
                yield yes
            keys = "tab: next field · y, or enter in the last, sends · n or escape cancels"
            yield Static(keys, id="write-keys")
        yield Footer(show_command_palette=False)

    def tick(self) -> None:
        self.query_one(DialogWords).tick()

    def on_mount(self) -> None:
        self.query_one("#write-error", Static).display = False
        self.query_one("#no", Button).focus()

    def answer(self) -> Answer:
        duration = self.query("#write-duration")
        return Answer(
            reason=self.query_one("#write-reason", Input).value,
            duration=duration.only_one(Input).value if duration else "",
            close=self.close,
        )

    async def action_send(self) -> None:
        if self._sending:  # a second `y` while the first is on its way
            return
        self._sending = True
        try:
            await self.form.send(self.answer())
        except Exception as error:  # the engine's or the feed's refusal: said here
            self._say(str(error) or type(error).__name__)
            return
        finally:
            self._sending = False
        self.dismiss(True)

    def _say(self, problem: str) -> None:
        error = self.query_one("#write-error", Static)
        error.update(f"Not sent: {printable(problem)}")
        error.display = True

    def action_cancel(self) -> None:
        self.dismiss(False)

    def action_toggle_close(self) -> None:
        choice = self.form.close_choice
        if choice is not None:
            self.close = not self.close
            self.query_one("#write-closed", Static).update(choice[self.close])

    @on(Input.Submitted)
    async def _submitted(self, event: Input.Submitted) -> None:
        """Enter moves to the next field; in the last one it sends."""
        fields = list(self.query(Input))
        if event.input is fields[-1]:
            await self.action_send()
        else:
            fields[fields.index(event.input) + 1].focus()

    @on(Button.Pressed)
    async def _pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "yes":
            await self.action_send()
        else:
            self.dismiss(False)
