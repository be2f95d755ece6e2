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
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from breakerdeck.engine import events as ev
from breakerdeck.engine.events import Event, decoded

#: A whole line as the trace's writer puts it: seq, t, at, type, key first, no spaces, one
#: object. Any other line is parsed whole.
_LINE = re.compile(
    rb'^\{"seq":(\d+),"t":(-?[0-9.eE+-]+),"at":"[^"\n]*","type":"([^"\\\n]+)",'
    rb'"key":"((?:[^"\\\n]|\\.)*)"[^\n]*\}[ \t\r]*(?:\n|\Z)',
    re.MULTILINE,
)
#: Bytes read at a time (the first chunk before the console opens).
CHUNK = 1 << 20
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
    in a background thread `start` begins); `count` grows as the scan goes, `done` once it
    reached the end."""

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
        self._left = b""
        self._offset = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._rest: BinaryIO | None = None

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
        self.start()
        while not self.done and (not self.walls or self.walls[-1] - LOOKAHEAD < wall):
            time.sleep(0.01)

    def start(self) -> None:
        """The rest of the trace scanned in a background thread (once; nothing left, nothing).
        Not begun by `open`: the console draws its first screen from the first chunk before
        the scan competes with it for the interpreter."""
        file, self._rest = self._rest, None
        if file is not None:
            self._thread = threading.Thread(
                target=self._scan_rest, args=(file,), name=f"index {self.path.name}", daemon=True
            )
            self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._rest is not None:
            self._rest.close()
            self._rest = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    # -- the scan ------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path) -> TraceIndex:
        """The index with the trace's first `CHUNK` in, the rest left for `start`. A trace with
        no trace line there is an error (`TraceLineError`, naming the line)."""
        index = cls(path)
        file = path.open("rb")
        try:
            more = index._scan(file)
            if not index.count():
                raise TraceLineError(
                    index.problems[0] if index.problems else f"{index.name} holds no events"
                )
        except BaseException:
            file.close()
            index.close()
            raise
        if more:
            index._rest = file
        else:
            file.close()
        return index

    def _scan_rest(self, file: BinaryIO) -> None:
        with file:
            while not self._stop.is_set() and self._scan(file):
                pass

    def _scan(self, file: BinaryIO) -> bool:
        """One chunk's whole lines in (a line cut by the chunk's end waits for the next);
        whether there is more."""
        data = self._left + file.read(CHUNK)
        if not data:
            self.done = True
            return False
        base = self._offset
        whole = data.rfind(b"\n") + 1
        if whole == 0 and len(data) <= len(self._left):  # the last line, without its newline
            whole = len(data)
        self._left = data[whole:]
        self._offset = base + whole
        taken = 0
        for match in _LINE.finditer(data, 0, whole):
            if match.start() != taken:
                self._slow(data[taken : match.start()], base + taken)
            taken = match.end()
            self.lines += 1
            head = match.groups()
            key = head[3].decode() if b"\\" not in head[3] else json.loads(b'"' + head[3] + b'"')
            self._add(int(head[0]), float(head[1]), head[2].decode(), key,
                      base + match.start(), base + taken, match[0])  # fmt: skip
        if taken != whole:
            self._slow(data[taken:whole], base + taken)
        return True

    def _slow(self, lines: bytes, start: int) -> None:
        """Lines the writer's head did not match: parsed whole, or listed as problems."""
        for raw in lines.splitlines(keepends=True):
            self.lines += 1
            end = start + len(raw)
            if raw.strip():
                try:
                    line = parse_line(raw)
                except TraceLineError as error:
                    self.problems.append(f"{self.name}, line {self.lines}: {error}")
                else:
                    key = str(line["key"])
                    self._add(int(line["seq"]), float(line["t"]), str(line["type"]), key,
                              start, end, raw, line)  # fmt: skip
            start = end

    def _add(
        self,
        seq: int,
        t: float,
        kind: str,
        key: str,
        start: int,
        end: int,
        raw: bytes,
        line: dict[str, Any] | None = None,
    ) -> None:
        index = len(self.starts)
        if not index:
            line = line or parse_line(raw)
            self.epoch = round(parse_iso(str(line["at"])) - t, 3)
        if _PROBE in raw:
            self._admitted(line or json.loads(raw), key)
        code = self._kind_codes.get(kind)
        if code is None:
            code = self._kind_codes[kind] = len(self.kind_names)
            self.kind_names.append(kind)
        if kind == ev.CALL_COMPLETED and (_QUIET[0] in raw or _QUIET[1] in raw):
            code |= QUIET
        lines = self.by_key.get(key)
        if lines is None:
            lines = self.by_key[key] = array("q")
        lines.append(index)
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
