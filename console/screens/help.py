"""`?`: every key, on one screen."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from breakerdeck.console.states import STATES

KEYS: list[tuple[str, str]] = [
    ("Dashboard", ""),
    ("j / ↓", "next card"),
    ("k / ↑", "previous card"),
    ("pgdn / pgup", "a page of cards down / up"),
    ("g / home", "first card; the selection follows the top card again"),
    ("G / end", "last card"),
    ("click / dbl-click", "select a card / open its details"),
    ("t", "table: every breaker as a row; s or a click on a header sorts, t goes back"),
    ("/", "filter: words, state:open, agent:billing*, platform:…, key:… (all must match)"),
    ("enter", "details: audit log, failures before each trip, the hint"),
    ("r", "reset the selected breaker (asks first; No is focused)"),
    ("R", "watching several engines: reset the key on every source where it is not closed"),
    ("f", "credential fixed: mark a PAUSED credential fixed; in demo, fix the platform's"),
    ("o", "hold the selected breaker open: a reason and a duration (30m), No focused"),
    ("O", "release a HELD breaker: half-open (the next call probes), or closed (c)"),
    ("m", "switch its mode: enforce ↔ shadow (shadow refuses nothing, counts would-be)"),
    ("M", "switch every shadow breaker shown (filter first: /) to enforce, asked once"),
    ("e", "export the incident as Markdown and JSON (files here; a download in a browser)"),
    ("escape", "clear the filter; with none, dismiss the toasts"),
    (
        "ctrl+p",
        "command palette: this screen's actions, saved views (open, held, probing, "
        "views.toml), contexts",
    ),
    ("q", "quit"),
    ("?", "this help"),
    ("Contexts", ""),
    ("1 … 9", "watch --context: show that context's tab (the header names it)"),
    ("p", "pulse: every context in one table; enter (or its number) shows one"),
    ("r R f o O m M", "in a read-only context: not sent, a notice says so"),
    ("Demo mode", ""),
    ("d", "take the selected card's platform down (connection refused)"),
    ("u", "bring that platform back (healthy)"),
    ("x", "revoke that platform's credential (auth failures, reauth_failed)"),
    ("f", "fix that credential again; then r resets the breaker"),
    ("Details", ""),
    ("escape / backspace", "back to the dashboard"),
    ("r / f", "reset / credential fixed, as on the dashboard"),
    ("o / O / m", "hold / release / mode, as on the dashboard"),
    ("j / k", "move through the audit log"),
    ("h", "hide / show the denied calls in the audit log"),
    ("Timeline", ""),
    (
        " ".join(look.glyph for look in STATES),
        f"{', '.join(look.css for look in STATES)}; a card's cell: 30 s (a minute at 80 columns)",
    ),
    ("✗ ✓ R !", "a probe failed, a probe succeeded, a reset, a page (drawn over the state)"),
    ("Replay", ""),
    ("space", "play / pause the recording (at the end: from the start)"),
    (". / ,", "one event on / back"),
    ("] / [", "a minute on / back"),
    ("n / N", "the next / previous transition of any breaker"),
    ("+ / -", "faster / slower (1× to 300× the recorded time)"),
    ("Dialogs", ""),
    ("y", "confirm"),
    ("n / escape", "cancel (the default: No is focused, so enter cancels too)"),
    ("tab", "hold, release, mode: the next field; enter in the last field sends, as y does"),
    ("c", "release: close instead of half-open (the operator vouches for the platform)"),
]

FLOW = (
    "After an auth trip (reauth_failed): fix the credential first (f), then reset (r). "
    "Resetting without fixing it trips the breaker again after three calls."
)


#: First, not last: at 80x24 the help is longer than the screen, and the way out must show.
CLOSE_LINE = "escape, ? or q closes this help; j/k scroll it"


def help_table() -> Table:
    table = Table(box=None, show_header=False, expand=True, padding=(0, 1))
    table.add_column("key", style="bold", no_wrap=True, width=18)
    table.add_column("what", ratio=1)
    table.add_row("", Text(CLOSE_LINE, style="dim"))
    for key, what in KEYS:
        if what:
            table.add_row(key, what)
        else:
            table.add_row(Text(key, style="bold underline"), "")
    table.add_row("", "")
    table.add_row("", Text(FLOW, style="bold"))
    return table


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "close", "Close", id="help-close"),
        # The list's own keys scroll the help too: they are what an operator's fingers try.
        Binding("j", "scroll(1)", "Down", show=False, id="help-down"),
        Binding("k", "scroll(-1)", "Up", show=False, id="help-up"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(help_table(), id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)

    def action_scroll(self, lines: int) -> None:
        self.query_one("#help-box", VerticalScroll).scroll_relative(
            y=lines, animate=False, immediate=True
        )
