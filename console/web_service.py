"""One browser's console: textual-serve's `AppService`, minus what makes it unsafe to expose.

textual-serve starts each connection's app with `create_subprocess_shell` and a copy of the
server's whole environment (its tokens, cloud credentials, `BREAKERDECK_TOKEN`), and passes on
whatever terminal size the browser asks for. Here the console is executed directly from an
argument list (no shell reads it), with an environment built from nothing but what the console
needs, and sizes are held within bounds. Everything else (the packet protocol, the stdout
reader, the quit on close) is textual-serve's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from asyncio.subprocess import PIPE, Process
from collections.abc import Sequence
from typing import Any

from textual_serve.app_service import AppService

from breakerdeck.console.web_role import WebSession, session_environment

#: A terminal at most this big: a 4K screen at a small font is about 400x120. The bound keeps a
#: browser from asking a console to lay out (and the server to relay) millions of cells.
MAX_COLUMNS = 400
MAX_ROWS = 150
#: And at least this: a zero-cell terminal is no console.
MIN_COLUMNS = 20
MIN_ROWS = 6

#: textual-serve's own variables, the only ones kept from the environment it builds.
TEXTUAL_SERVE_VARIABLES = (
    "TEXTUAL_DRIVER",
    "TEXTUAL_FPS",
    "TEXTUAL_COLOR_SYSTEM",
    "TERM_PROGRAM",
    "TERM_PROGRAM_VERSION",
    "COLUMNS",
    "ROWS",
)

#: A console told to quit that has not gone after this long is killed.
STOP_SECONDS = 5.0


def clamp_size(width: Any, height: Any) -> tuple[int, int] | None:
    """The size to use for what a browser sent, or None when it is not a size at all."""
    try:
        columns, rows = int(width), int(height)
    except (TypeError, ValueError, OverflowError):
        return None
    return (
        min(max(columns, MIN_COLUMNS), MAX_COLUMNS),
        min(max(rows, MIN_ROWS), MAX_ROWS),
    )


def console_environment(base: dict[str, str], session: WebSession) -> dict[str, str]:
    """textual-serve's variables from `base`, the session's, and enough to run Python: no
    variable of the server's own reaches a browser's console."""
    kept = {name: base[name] for name in TEXTUAL_SERVE_VARIABLES if name in base}
    return {
        "PATH": os.defpath,
        "LANG": "C.UTF-8",
        **kept,
        **session_environment(session),
    }


class ConsoleService(AppService):
    """A console process for one websocket, executed from `argv`."""

    def __init__(self, argv: Sequence[str], session: WebSession, **kwargs: Any) -> None:
        super().__init__(" ".join(argv), **kwargs)  # the command is only ever shown
        self.argv = list(argv)
        self.session = session

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        return console_environment(super()._build_environment(width, height), self.session)

    async def _open_app_process(self, width: int = 80, height: int = 24) -> Process:
        self._process = process = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=PIPE,
            stdout=PIPE,
            stderr=PIPE,
            env=self._build_environment(width=width, height=height),
            start_new_session=True,  # a Ctrl-C in the server's terminal is the server's
        )
        assert process.stdin is not None
        self._stdin = process.stdin
        return process

    async def start(self, width: int, height: int) -> None:
        columns, rows = clamp_size(width, height) or (80, 24)
        await super().start(columns, rows)

    async def set_terminal_size(self, width: int, height: int) -> None:
        size = clamp_size(width, height)
        if size is not None:
            await super().set_terminal_size(*size)

    async def stop(self) -> None:
        """textual-serve's stop (a quit packet, then the reader's end), bounded: a console
        that does not leave is killed, so a closed tab never leaves a process behind."""
        try:
            await asyncio.wait_for(super().stop(), STOP_SECONDS)
        except TimeoutError:
            self._task = None
        process = self._process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid
