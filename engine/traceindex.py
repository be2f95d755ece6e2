"""A trace's lines indexed by where they start, read back one at a time as a replay reaches them.

A replayed trace can be far larger than one would hold decoded (a million lines is 364 MB of
JSON and two gigabytes as events). Like a log viewer that opens any file at once, the index
scans the file in the background with buffered binary reads and keeps, per line, only what the
player needs to move without reading it: where it starts and ends, its time, its kind, and the
lines of each key. Everything else (its fields, its view) is decoded when it is played.

The trace's writer (`engine/tracefile.py`) puts the fixed keys first and writes JSON without
spaces, so most lines are indexed from their first bytes; any other line is parsed whole. A
line that is not a trace line is listed in `problems` and skipped: the replay says so and
plays on. Only a trace whose first line is not one stops it, as before.
"""

from __future__ import annotations

import bisect
import json
import os
import re
import threading
import time
from array import array
from collections.abc import Generator
from datetime import datetime
from pathlib import Path
from typing import Any

from breakerdeck.engine import events as ev
from breakerdeck.engine.events import Event, decoded

#: The head the trace's writer gives every line: seq, t, at, type, key, in that order.
_HEAD = re.compile(
    rb'\{"seq":(\d+),"t":(-?[0-9.eE+-]+),"at":"[^"]*","type":"([^"\\]+)","key":"((?:[^"\\]|\\.)*)"'
)
_PROBE = b'"admitted_as":"probe"'
#: A call that is not history (a success, a relayed 1xx-3xx): what an audit log would not keep.
_QUIET = (b'"outcome":"success"', b'"outcome":"platform_answer"')
_LINE_KEYS = frozenset({"seq", "t", "at", "type", "key", "agent"})
#: A kind code's high bit: the line is a quiet call.
QUIET = 0x80
#: What moves a breaker (`n`/`N` go to them).
CHANGES = frozenset({*ev.TRANSITIONS, ev.CREDENTIAL_REVOKED, ev.CREDENTIAL_RESTORED})
#: A probe's line comes within its deadline of its admission: the player stays this many
#: recorded seconds behind the scan, so every admission is known before its line is played.
LOOKAHEAD = 120.0
#: Lines `open` reads before it returns (a few milliseconds): the policy is guessed from them.
FIRST = 2000


class TraceLineError(ValueError):
    """A line that is not a trace line."""


def parse_line(raw: bytes | str) -> dict[str, Any]:
    """A trace line's JSON object, its fixed keys checked."""
    try:
        line = json.loads(raw)
        int(line["seq"]), float(line["t"]), str(line["type"]), str(line["key"]), str(line["at"])
    except (ValueError, KeyError, TypeError) as error:
        raise TraceLineError(
            f"not a trace line ({error.__class__.__name__}: {error}); "
            "expected the JSON lines `demo --headless` or a door's --events writes"
        ) from None
    if not isinstance(line, dict):
        raise TraceLineError("not a trace line (not a JSON object)")
    return line


def line_event(line: dict[str, Any], epoch: float) -> Event:
    """A parsed trace line as the event it records (wall = the recording's epoch + `t`)."""
    fields = {k: v for k, v in line.items() if k not in _LINE_KEYS}
    agent = line.get("agent")
    return decoded(int(line["seq"]), str(line["type"]), str(line["key"]), agent,
                   epoch + float(line["t"]), fields)  # fmt: skip


class TraceIndex:
    """Per line: start and end offsets, wall, seq, kind; per key its lines; the lines that
    change a breaker; the probes' admissions. Built by `open` (the first line at once, the rest
    in a background thread); `count` grows as the scan goes, `done` once it reached the end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = str(path)
        self.starts = array("q")
        self.ends = array("q")
        self.walls = array("d")
        self.seqs = array("q")
        self.kinds = bytearray()
        self.kind_names: list[str] = []
        self._kind_codes: dict[str, int] = {}
        self.by_key: dict[str, array[int]] = {}
        #: Lines that change a breaker (`n`/`N`), and the transitions among them.
        self.changes = array("q")
        self.transitions = array("q")
        #: Probes by the seq of the line after which each was admitted: (key, call id, wall).
        self.admissions: dict[int, list[tuple[str, str, float]]] = {}
        self.tripped_by: frozenset[Any] = frozenset()  # a trace holds every call
        #: Lines skipped, in words (line number first); read by the player as they come.
        self.problems: list[str] = []
        self.epoch = 0.0
        self.done = False
        self.lines = 0  # physical lines scanned
        self._fd = os.open(path, os.O_RDONLY)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what the player reads ---------------------------------------------------------------

    def count(self) -> int:
        return len(self.starts)

    def playable(self) -> int:
        """The lines whose probes are all known: every line once the scan is done."""
        n = len(self.walls)
        if self.done or not n:
            return n
        return bisect.bisect_right(self.walls, self.walls[n - 1] - LOOKAHEAD, 0, n)

    def kind(self, index: int) -> tuple[str, bool]:
        """The line's type, and whether it is a quiet call (no audit log keeps it)."""
        code = self.kinds[index]
        return self.kind_names[code & ~QUIET], bool(code & QUIET)

    def lines_of(self, key: str) -> array[int]:
        return self.by_key.get(key, array("q"))

    def event(self, index: int) -> Event:
        """The line decoded. One changed under the index since (the file rewritten) keeps its
        place with what the index knows of it, and is listed as a problem."""
        start, end = self.starts[index], self.ends[index]
        raw = os.pread(self._fd, end - start, start)
        try:
            return line_event(parse_line(raw), self.epoch)
        except TraceLineError as error:
            self.problems.append(f"{self.name}, line at byte {start}: {error}")
            kind, _ = self.kind(index)
            return decoded(self.seqs[index], kind, "?", None, self.walls[index], {})

    def reach(self, wall: float) -> None:
        """Wait until the player can reach `wall` (or the scan is done): `--at` far in."""
        while not self.done and (not self.walls or self.walls[-1] - LOOKAHEAD < wall):
            time.sleep(0.01)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    # -- the scan ------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path) -> TraceIndex:
        """The index with the trace's first `FIRST` lines in, the rest scanned in the background.
        A trace whose first line is not a trace line, or with no line at all, is an error
        (`TraceLineError`, its message naming the line)."""
        index = cls(path)
        lines = index._scan()
        try:
            for _ in lines:
                if index.problems and not index.count():
                    raise TraceLineError(index.problems[0])
                if index.lines >= FIRST:
                    break
            if not index.count():
                raise TraceLineError(f"{index.name} holds no events")
        except BaseException:
            lines.close()
            os.close(index._fd)
            raise
        index._thread = threading.Thread(
            target=lambda: any(index._stop.is_set() for _ in lines),
            name=f"index {path.name}",
            daemon=True,
        )
        index._thread.start()
        return index

    def _scan(self) -> Generator[None, None, None]:
        """Takes one line per step (a generator, so `open` can stop after the first)."""
        offset = 0
        try:
            with self.path.open("rb") as file:
                for raw in file:
                    self.lines += 1
                    start, offset = offset, offset + len(raw)
                    if raw.strip():
                        self._take(raw, start, offset)
                    yield
        finally:
            self.done = True

    def _take(self, raw: bytes, start: int, end: int) -> None:
        head = _HEAD.match(raw)
        if head is None or not self.starts or _PROBE in raw or not raw.rstrip().endswith(b"}"):
            try:
                line = parse_line(raw)
            except TraceLineError as error:
                self.problems.append(f"{self.name}, line {self.lines}: {error}")
                return
            if not self.starts:
                self.epoch = round(parse_iso(str(line["at"])) - float(line["t"]), 3)
            seq, t, kind, key = int(line["seq"]), float(line["t"]), str(line["type"]), line["key"]
            key = str(key)
            if line.get("admitted_as") == "probe":
                self._admitted(line, key)
        else:
            seq, t = int(head[1]), float(head[2])
            kind = head[3].decode()
            key = json.loads(b'"' + head[4] + b'"')
        code = self._kind_codes.get(kind)
        if code is None:
            code = self._kind_codes[kind] = len(self.kind_names)
            self.kind_names.append(kind)
        if any(quiet in raw for quiet in _QUIET) and kind == ev.CALL_COMPLETED:
            code |= QUIET
        index = len(self.starts)
        self.by_key.setdefault(key, array("q")).append(index)
        if kind in CHANGES:
            self.changes.append(index)
            if kind in ev.TRANSITIONS:
                self.transitions.append(index)
        self.seqs.append(seq)
        self.walls.append(self.epoch + t)
        self.kinds.append(code)
        self.ends.append(end)
        self.starts.append(start)  # last: a line counts once all of it is in

    def _admitted(self, line: dict[str, Any], key: str) -> None:
        seq = line.get("admitted_seq")
        if not isinstance(seq, int):
            return
        at = bisect.bisect_left(self.seqs, seq)
        if at == len(self.seqs) or self.seqs[at] != seq:
            return  # admitted before the recording begins: taken at its completion
        admitted_t = line.get("admitted_t")
        wall = self.epoch + float(admitted_t) if admitted_t is not None else self.walls[at]
        self.admissions.setdefault(seq, []).append((key, str(line.get("call_id")), wall))


def parse_iso(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
