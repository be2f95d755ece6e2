"""The command palette (`ctrl+p`, Textual's own): every action the screen offers right now.

Its commands are the screen's and the app's own key bindings as `check_action` offers them at
that moment (Textual's `Screen.active_bindings`): an action the screen refuses (reset in a
viewer's web console or a replay) or greys out (reset on a closed card) is not listed, so the
palette can never do what the keys cannot. A command is checked again when it runs: the card
selected may have changed while the palette was open.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from textual import actions
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.dom import DOMNode
from textual.screen import Screen

#: Where a key's footer word is too short for a list of commands read without the footer.
_TITLES = {"demo-down": "Platform down (demo)"}
#: Keys that are no command of their own: a context's number (the contexts are listed by name,
#: `console.view_commands`) and a read-only console's write keys (they only say that nothing
#: is sent; a palette listing "reset" there would offer what the console refuses).
_NOT_COMMANDS = re.compile(r"(context|read-only)-\d+")


def screen_commands(app: App[Any], screen: Screen[Any]) -> list[SystemCommand]:
    """The palette's commands for `screen`: one per action it offers now, in footer order."""
    commands: list[SystemCommand] = []
    seen: set[str] = set()
    # The screen's keys first: `q` (app.quit on the dashboard) stands for ctrl+c's quit too.
    bindings = sorted(screen.active_bindings.values(), key=lambda active: active.node is app)
    for active in bindings:
        binding, node = active.binding, active.node
        # Ours only (they carry ids), on the screen or the app: not a focused widget's cursor
        # keys, nor Textual's own (focus, the palette itself, ctrl+q).
        if binding.id is None or node not in (screen, app) or not active.enabled:
            continue
        if _NOT_COMMANDS.fullmatch(binding.id):
            continue
        destination, name, parameters = actions.parse(binding.action)
        target = destination or ("app" if node is app else "screen")
        what = f"{target}.{name}{parameters}"
        if what in seen:
            continue
        seen.add(what)
        commands.append(
            SystemCommand(
                _TITLES.get(binding.id, binding.description),
                _help(app, binding),
                _runner(app, node, binding.action),
            )
        )
    return commands


def palette_commands(
    app: App[Any], screen: Screen[Any], textual: Iterable[SystemCommand]
) -> list[SystemCommand]:
    """The screen's commands, then Textual's own (theme, keys, screenshot) but for those the
    screen already has (quit)."""
    ours = screen_commands(app, screen)
    titles = {command.title for command in ours}
    return ours + [command for command in textual if command.title not in titles]


def _help(app: App[Any], binding: Binding) -> str:
    key = app.get_key_display(binding)
    return f"{binding.tooltip} ({key})" if binding.tooltip else f"key: {key}"


def _runner(app: App[Any], node: DOMNode, action: str) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        destination, name, parameters = actions.parse(action)
        target = {"app": app, "screen": app.screen}.get(destination, node)
        if target.check_action(name, parameters):
            await app.run_action(action, node)

    return run
