"""Standard output for the commands, and what a reader that leaves means for the exit status.

`status --json | head` is a reader that took what it wanted and left: `status`'s verdict (0, 1,
2) still stands. A reader that was gone before anything reached it (a closed pipe), or a write
that fails for another reason (a full disk), is an I/O error: exit 74. The first write is
flushed at once, so a broken pipe later on is known to come after something was delivered;
the rest stays buffered.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Collection, Iterable, Sequence
from typing import IO

from breakerdeck.engine.text import printable

#: A mistake on the command line (sysexits' EX_USAGE).
EXIT_USAGE = 64
#: `contexts.toml` or `views.toml` refused or not valid (sysexits' EX_CONFIG): said which, why.
EXIT_CONFIG = 78
#: The output could not be written (sysexits' EX_IOERR): a closed pipe, a full disk.
EXIT_IO = 74


def say(message: str) -> None:
    """One message on standard error. Messages carry outside text (keys, sources, paths, a
    server's error): escaped, so none of it drives the terminal. A standard error nobody reads
    does not change what the command does or its exit status."""
    try:
        print(f"breakerdeck: {printable(message)}", file=sys.stderr, flush=True)
    except OSError:
        discard(sys.stderr)


def aligned(
    rows: Sequence[Sequence[str]],
    *,
    right: Collection[int] = (),
    footer: Sequence[str] | None = None,
) -> list[str]:
    """A plain table's lines: columns two spaces apart, the `right` ones (numbers) flush right,
    a `footer` (a total) under a rule. Every cell is escaped, since keys, agents and reasons
    come from outside; nothing is read as markup, the lines are printed as they are."""
    cells = [[printable(cell) for cell in row] for row in (*rows, *([footer] if footer else []))]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    if footer:
        cells.insert(len(rows), ["-" * width for width in widths])
    return [
        "  ".join(
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        + "\n"
        for row in cells
    ]


class Output:
    """A text stream whose failures are remembered, not raised: see `exit_status`."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.delivered = False
        self.failed: OSError | None = None

    def write(self, text: str) -> bool:
        """False once the output failed: the caller may stop producing more."""
        if self.failed is not None:
            return False
        try:
            self.stream.write(text)
            if not self.delivered:
                self.stream.flush()
                self.delivered = True
        except OSError as error:
            self._fail(error)
            return False
        return True

    def close(self) -> None:
        """Flush what is buffered (the file itself is its owner's to close)."""
        if self.failed is None:
            try:
                self.stream.flush()
            except OSError as error:
                self._fail(error)

    def _fail(self, error: OSError) -> None:
        self.failed = error
        if isinstance(error, BrokenPipeError):
            discard(self.stream)

    @property
    def left_early(self) -> bool:
        """The reader took some of the output and went away (`| head`): not an error."""
        return isinstance(self.failed, BrokenPipeError) and self.delivered

    def exit_status(self, verdict: int) -> int:
        """`verdict` when the output was written (or its reader left after taking some)."""
        if self.failed is None or self.left_early:
            return verdict
        return EXIT_IO

    def problem(self) -> str | None:
        """What went wrong, for standard error (None when nothing did, or the reader left)."""
        if self.failed is None or self.left_early:
            return None
        if isinstance(self.failed, BrokenPipeError):
            return "cannot write the output: its reader is gone (a closed pipe)"
        return printable(f"cannot write the output: {self.failed.strerror or self.failed}")


def deliver(lines: Iterable[str], verdict: int) -> int:
    """`lines` on standard output, line by line: `status | head` keeps the verdict, a closed
    pipe or a full disk is an I/O error (74)."""
    out = Output(sys.stdout)
    for line in lines:
        if not out.write(line):
            break
    out.close()
    problem = out.problem()
    if problem:
        say(problem)
    return out.exit_status(verdict)


def discard(stream: IO[str]) -> None:
    """Point the stream's descriptor at /dev/null, so what is still buffered cannot fail again
    when the interpreter flushes it on exit (which would turn the exit status into 120)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fd = stream.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
