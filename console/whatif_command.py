"""`breakerdeck whatif`: what enforcing would have done where breakers ran in shadow, per key,
from a trace or a state dir's audit log (any door's), read by the replay's own readers.

A trace is read a chunk at a time and only its `call.would_deny` lines are decoded; an audit
log is asked for those rows alone, a batch at a time: a recording of any size is read in
bounded memory. The table (or `--json`, one object per key a line) goes to standard output;
what was read, and the lines skipped, go to standard error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from breakerdeck.console.output import aligned, deliver, say
from breakerdeck.engine.recorded.replay import ReplayError, read_audit
from breakerdeck.engine.recorded.traceindex import TypeLines
from breakerdeck.engine.recorded.whatif import WOULD_DENY, Tally, WhatIf, what_if
from breakerdeck.engine.text import counted

#: The recording cannot be read (replay's number for it).
EXIT_UNREADABLE = 2

_HEADER = ("KEY", "WOULD DENY", "FALSE REFUSALS", "SAVED", "SECONDS SAVED")


def run_whatif(args: argparse.Namespace) -> int:
    try:
        name, result, skipped, problems = _tally(args)
    except ReplayError as error:
        say(str(error))
        return EXIT_UNREADABLE
    except OSError as error:
        say(f"cannot read {error.filename or args.trace}: {error.strerror or error}")
        return EXIT_UNREADABLE
    for problem in problems:
        say(f"skipped {problem}")
    if skipped > len(problems):
        say(f"{counted(skipped, 'line')} skipped in all")
    total = result.total()
    if total.would_deny:
        say(f"{name}: {counted(total.would_deny, 'would-be refusal')} on "
            f"{counted(len(result.keys), 'key')}")  # fmt: skip
    else:
        say(f"{name}: no {WOULD_DENY} lines: no breaker ran in shadow there, or none would "
            "have refused a call")  # fmt: skip
    lines = _json_lines(result) if args.json else table_lines(result, by_reason=args.by_reason)
    return deliver(lines, 0)


def _tally(args: argparse.Namespace) -> tuple[str, WhatIf, int, list[str]]:
    """The recording's name, its tally, and the lines skipped: how many, and the first few of
    each kind in words (those that are not trace lines, then the would-deny lines whose fields
    are not the design's)."""
    if args.state_dir:
        directory = Path(args.state_dir).expanduser()
        result = what_if(read_audit(directory / "audit.sqlite3", (WOULD_DENY,)))
        return str(directory), result, result.skipped, result.problems
    if args.trace == "-":
        return _tally_trace(sys.stdin.buffer, "standard input")
    path = Path(args.trace).expanduser()
    if path.is_dir():
        raise ReplayError(f"{path} is a directory; a state dir is read with --state-dir")
    with path.open("rb") as file:
        return _tally_trace(file, str(path))


def _tally_trace(file: BinaryIO, name: str) -> tuple[str, WhatIf, int, list[str]]:
    lines = TypeLines(file, name, (WOULD_DENY,))
    result = what_if(lines)
    if lines.skipped and not lines.started:
        raise ReplayError(f"{name} holds no trace line: {lines.problems[0]}")
    return name, result, lines.skipped + result.skipped, [*lines.problems, *result.problems]


def table_lines(result: WhatIf, *, by_reason: bool = False) -> list[str]:
    """The plain table: a row per key (or per key and reason), most refusals first, and the
    total under a rule. Keys and reasons are escaped by `aligned`."""
    header = _HEADER[:1] + (("REASON",) if by_reason else ()) + _HEADER[1:]
    rows: list[tuple[str, ...]] = [header]
    for key, tally in result.ranked():
        if by_reason:
            rows.extend(
                (key, reason, *_numbers(part)) for reason, part in sorted(tally.by_reason.items())
            )
        else:
            rows.append((key, *_numbers(tally)))
    lead = ("total", "") if by_reason else ("total",)
    numbers = range(len(lead), len(header))
    return aligned(rows, right=numbers, footer=(*lead, *_numbers(result.total())))


def _numbers(tally: Tally) -> tuple[str, ...]:
    return (
        f"{tally.would_deny:,}",
        f"{tally.false_refusals:,}",
        f"{tally.saved:,}",
        f"{tally.seconds_saved:,.1f}",
    )


def _json_lines(result: WhatIf) -> Iterator[str]:
    for key, tally in result.ranked():
        record = {"key": key, **tally.record()}
        record["by_reason"] = {
            reason: part.record() for reason, part in sorted(tally.by_reason.items())
        }
        yield json.dumps(record, separators=(",", ":")) + "\n"
