"""`?`: every key, on one screen."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS: list[tuple[str, str]] = [
    ("Dashboard", ""),
    ("j / ↓", "next card"),
    ("k / ↑", "previous card"),
    ("pgdn / pgup", "a page of cards down / up"),
    ("g / home, G / end", "first / last card"),
    ("/", "filter by agent, key or state (enter keeps it, escape clears)"),
    ("enter", "details: audit log, failures before each trip, the hint"),
    ("r", "reset the selected breaker (asks first; No is focused)"),
    ("f", "credential fixed: mark a PAUSED credential fixed; in demo, fix the platform's"),
    ("q", "quit"),
    ("?", "this help"),
    ("Demo fault controls (demo mode only)", ""),
    ("d", "take the selected card's platform down (connection refused)"),
    ("u", "bring that platform back (healthy)"),
    ("x", "revoke that platform's credential (auth failures, reauth_failed)"),
    ("f", "fix that credential again; then r resets the breaker"),
    ("Details screen", ""),
    ("escape / backspace", "back to the dashboard"),
    ("r / f", "reset / credential fixed, as on the dashboard"),
    ("j / k", "move through the audit log"),
    ("Confirmation dialogs", ""),
    ("y", "confirm"),
    ("n / escape", "cancel (the default: No is focused, so enter cancels too)"),
]

FLOW = (
    "After an auth trip (reauth_failed): fix the credential first (f), then reset (r). "
    "Resetting without fixing it trips the breaker again after three calls."
)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "close", "Close", id="help-close"),
    ]

    def compose(self) -> ComposeResult:
        lines = []
        for key, what in KEYS:
            if not what:
                lines.append(f"\n[b]{key}[/b]")
            else:
                lines.append(f"  [b]{key:<20}[/b] {what}")
        lines.append(f"\n{FLOW}")
        lines.append("\nescape, ? or q closes this help")
        with VerticalScroll(id="help-box"):
            yield Static("\n".join(lines).lstrip("\n"), id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)
