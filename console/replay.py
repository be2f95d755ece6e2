"""`breakerdeck replay`: the console on a recorded incident, read-only.

A `ReplaySource` is a `Source` whose engine is a recording played through the engine's own
breaker core (`engine.playback`): a trace is indexed in the background and each event decoded
and folded only as the cursor reaches it (an audit log is read whole), each carrying the view
the core's breaker had after it. The console reads them exactly as it reads a live engine's,
so cards, timeline, details and event log are what they were at the replay's clock. The source
keeps a cursor into the events and a clock of recorded time; playing moves both at a speed, the
keys step, jump and seek. Moving back, or far forward, starts the console's history over
(`Restart`) and reads it again at the cursor.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from breakerdeck.console.card import Thresholds
from breakerdeck.console.source import TRIP_TYPES, FreshViews, Notice, Restart, Source
from breakerdeck.engine.events import BreakerView, Event
from breakerdeck.engine.feed.bus import Missed
from breakerdeck.engine.recorded.playback import WINDOW, Playback, play_audit, play_trace

#: Playing speeds, recorded seconds per real second (`+` and `-` move along them).
SPEEDS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
DEFAULT_SPEED = 10.0
#: While playing, the clock moves on at least this often (real seconds).
PLAY_STEP = 0.25
#: `]` and `[` move the clock this far.
JUMP_SECONDS = 60.0
#: Problems (lines skipped, divergences) said as toasts; the rest are counted on the last.
SAID = 5

#: Could not start (the recording unreadable): the message says why.
EXIT_START = 2

_TRIPS = frozenset(TRIP_TYPES)


class ReplaySource(Source, FreshViews):
    """A recording as a source: events up to a cursor, a clock, play and pause."""

    def __init__(self, playback: Playback, *, label: str, speed: float = DEFAULT_SPEED) -> None:
        self.playback = playback
        self.store = playback.store
        self._walls = self.store.walls
        self.label = label
        self.rate = speed
        self.playing = False
        self._thresholds = Thresholds.of(playback.policy)
        self.start = self._walls[0]
        self.clock = self.start
        #: Events before the cursor have happened; `_pending` holds those the updates owe.
        self.cursor = 0
        self._pending: list[Event] = []
        self._restart = False
        self._said = 0
        self._problems = 0
        self._wake = asyncio.Event()
        self._played_at = time.monotonic()
        self.approximate_counts = not playback.complete
        self.recorded = True
        self.seek(self.start)  # at the first event (and every other of its moment)
        self._pending, self._restart = [], False  # the first snapshot reads them

    # -- what a source answers -------------------------------------------------------------

    @property
    def thresholds(self) -> Thresholds:
        return self._thresholds

    @property
    def end(self) -> float:
        """The last recorded time the player can reach (it grows while the trace is indexed)."""
        return self._walls[max(0, self.store.playable() - 1)]

    def now(self) -> float:
        return self.clock

    def snapshot(self) -> list[BreakerView]:
        return self.playback.views()

    def fresh_views(self, ids: list[str]) -> list[BreakerView]:
        """The breakers' views as of the cursor (a probe's admission writes no line)."""
        wanted = set(ids)
        return [view for view in self.playback.views() if view.key in wanted]

    def recent(self, limit: int) -> list[Event]:
        """The board's history at the cursor: the last `limit` transitions before the last few
        thousand events (`engine.playback.WINDOW`), then the events of those the cards tell
        from."""
        return self.playback.recent(limit)

    async def updates(self) -> AsyncIterator[list[Event] | Missed | Restart | Notice]:
        yield Missed(0)
        while True:
            if self.playing:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._until_next())
                self._play()
            elif self.store.done:
                await self._wake.wait()
            else:  # the index grows: the status line says how far
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), PLAY_STEP)
            self._wake.clear()
            for notice in self._notices():
                yield notice
            if self._restart:
                self._pending, self._restart = [], False
                yield Restart()
            elif self._pending:
                batch, self._pending = self._pending, []
                yield batch
            else:
                yield []  # the clock moved or the player changed: worth a repaint

    def _notices(self) -> list[Notice]:
        """The trace's lines skipped and the core's disagreements, as the player meets them."""
        fresh = self.store.problems[self._problems :]
        self._problems += len(fresh)
        said = []
        for text in [*fresh, *(f"the core disagrees with the recording: {d}"
                               for d in self.playback.divergences())]:  # fmt: skip
            self._said += 1
            if self._said <= SAID:
                said.append(Notice(text, "warning"))
        return said

    async def audit(self, key: str, limit: int = 200) -> list[Event]:
        return self.playback.rows(key, limit)

    async def trip_history(self, key: str, limit: int = 2000) -> list[Event]:
        return self.playback.rows(key, limit, _TRIPS)

    def audit_note(self, ident: str) -> str | None:
        complete = self.playback.complete
        what = "trace" if complete else "audit log (it keeps no successes)"
        return f"The recorded {what}, up to the replay's clock; newest first."

    def close(self) -> None:
        self.playback.close()

    # -- the player ------------------------------------------------------------------------

    def status(self) -> str:
        """The player's line: playing or paused, its speed, where in the recording; then its
        keys (after two spaces)."""
        state = f"▶ ×{self.rate:g}" if self.playing else f"⏸ ×{self.rate:g}"
        total = self.store.count()
        if self.store.done and self.cursor >= total:
            state = "■ end"
        where = f"{self.cursor:,}/{total:,}" + ("" if self.store.done else "… indexing")
        return f" {state} {where}   space play · ./, step · ]/[ ±1m · n/N change · +/- speed"

    def _go(self, to: int) -> None:
        """The cursor to `to`: folded on with its events owed to the console, or (back, or
        far ahead) folded from a checkpoint with the console's history read again."""
        to = max(0, min(to, self.store.playable()))
        position = self.playback.position
        if not self._restart and position <= to <= position + WINDOW - len(self._pending):
            self._pending.extend(self.playback.advance(to))
        else:
            self.playback.move_to(to)
            self._restart = True
        self.cursor = to
        self._wake.set()

    def play_pause(self) -> None:
        if not self.playing and self.store.done and self.cursor >= self.store.count():
            self.seek(self.start)  # from the start again
        self.playing = not self.playing
        self._played_at = time.monotonic()
        self._wake.set()

    def faster(self, steps: int = 1) -> None:
        at = bisect.bisect_left(SPEEDS, self.rate)
        self.rate = SPEEDS[max(0, min(len(SPEEDS) - 1, at + steps))]
        self._wake.set()

    def step(self, events: int) -> None:
        """One event on (or back): the clock goes to its time."""
        self.playing = False
        self._go(self.cursor + events)
        self.clock = self._walls[self.cursor - 1] if self.cursor else self.start

    def jump(self, seconds: float) -> None:
        self.seek(self.clock + seconds)

    def seek(self, wall: float) -> None:
        """The clock to `wall` (within the recording), every event up to it applied."""
        self.clock = max(self.start, min(self.end, wall))
        self._go(bisect.bisect_right(self._walls, self.clock, 0, self.store.playable()))
        self._played_at = time.monotonic()

    def next_change(self, direction: int = 1) -> None:
        """To the next (or previous) transition of any breaker, with every event of its
        moment (a trip's page, the other breakers it took along)."""
        self.playing = False
        changes, walls = self.store.changes, self._walls
        if direction > 0:
            at = bisect.bisect_left(changes, self.cursor)
            if at < len(changes) and changes[at] < self.store.playable():
                self.seek(walls[changes[at]])
            else:
                self.seek(self.end)
            return
        last = self.cursor - 1
        while last >= 0 and walls[last] == self.clock and not _is_change(changes, last):
            last -= 1  # the moment the cursor stands at
        at = bisect.bisect_left(changes, last) - 1
        self.seek(walls[changes[at]] if at >= 0 else self.start)

    def _until_next(self) -> float:
        if self.cursor >= self.store.playable():
            return PLAY_STEP
        left = (self._walls[self.cursor] - self.clock) / self.rate
        return max(0.0, min(PLAY_STEP, left))

    def _play(self) -> None:
        now = time.monotonic()
        self.clock = min(self.end, self.clock + (now - self._played_at) * self.rate)
        self._played_at = now
        self._go(bisect.bisect_right(self._walls, self.clock, 0, self.store.playable()))
        if self.store.done and self.cursor >= self.store.count():
            self.playing = False


def _is_change(changes: Sequence[int], index: int) -> bool:
    at = bisect.bisect_left(changes, index)
    return at < len(changes) and changes[at] == index


def load(args: argparse.Namespace) -> tuple[Playback, str]:
    if args.state_dir:
        directory = Path(args.state_dir).expanduser()
        return play_audit(directory, args.policy), f"replay {directory.name or directory}"
    path = Path(args.trace).expanduser()
    return play_trace(path, args.policy), f"replay {path.name}"
