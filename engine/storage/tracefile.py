"""The headless trace's lines, written by any door (DESIGN, "The headless trace").

`breakerdeck demo --headless`, `breakerdeck gateway --events FILE` and `breakerdeck mcp --events
FILE` write the same format from the same place: every event the engine delivers, as one
compact JSON object per line, `t` counted from the engine's epoch (the run's start on its
clock). A production incident's trace is then checked and replayed by the same tools as a
scenario's.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

from breakerdeck.engine.events import Event, record
from breakerdeck.engine.text import printable

log = logging.getLogger(__name__)

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def trace_lines(
    write: Callable[[str], bool], epoch: float, on_stop: Callable[[], None]
) -> Callable[[Event], None]:
    """An engine listener writing each event as a trace line through `write`; once `write`
    says the output failed (its reader left, the disk is full), `on_stop` is called and
    nothing more is written."""
    stopped = False

    def listener(event: Event) -> None:
        nonlocal stopped
        if stopped:
            return
        if not write(json.dumps(record(event, epoch), separators=(",", ":")) + "\n"):
            stopped = True
            on_stop()

    return listener


class TraceFile:
    """A door's `--events FILE`: created private (0600) and never through a symlink, one line
    flushed at a time (a reader tailing it sees each event as it happens). A failed write
    stops the trace, never the door: it is logged once and listed in `problem`."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW, 0o600)
        self._file = os.fdopen(fd, "w", encoding="utf-8", buffering=1)
        self.problem: str | None = None

    def listener(self, epoch: float) -> Callable[[Event], None]:
        return trace_lines(self._write, epoch, self._stopped)

    def _write(self, line: str) -> bool:
        try:
            self._file.write(line)
        except (OSError, ValueError) as error:  # ValueError: written after close
            self.problem = printable(
                f"the trace to {self.path} stopped: {getattr(error, 'strerror', None) or error}"
            )
            return False
        return True

    def _stopped(self) -> None:
        log.error("%s", self.problem)

    def close(self) -> None:
        try:
            self._file.close()
        except OSError as error:
            self.problem = printable(f"the trace to {self.path} lost its end: {error}")
