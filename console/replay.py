"""`breakerdeck replay`: the console on a recorded incident, read-only.

A `ReplaySource` is a `Source` whose engine is a recording: the events of a trace (or a state
dir's audit log) folded through the engine's own breaker core (`engine.replay`), each carrying
the view the core's breaker had after it. The console reads them exactly as it reads a live
engine's, so cards, timeline, details and event log are what they were at the replay's clock.
The source keeps a cursor into the events and a clock of recorded time; playing moves both at
a speed, the keys step, jump and seek. Moving back starts the console's history over
(`Restart`) and reads it again up to the cursor.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

from breakerdeck.console.card import Thresholds
from breakerdeck.console.source import TRIP_TYPES, Restart, Source
from breakerdeck.engine import events as ev
from breakerdeck.engine.bus import Missed
from breakerdeck.engine.events import BreakerView, Event
from breakerdeck.engine.replay import Replay, replay_audit, replay_trace

#: Playing speeds, recorded seconds per real second (`+` and `-` move along them).
SPEEDS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
DEFAULT_SPEED = 10.0
#: While playing, the clock moves on at least this often (real seconds).
PLAY_STEP = 0.25
#: `]` and `[` move the clock this far.
JUMP_SECONDS = 60.0

#: Could not start (the recording unreadable): the message says why.
EXIT_START = 2

_QUIET = frozenset({ev.CALL_COMPLETED})


class ReplaySource(Source):
    """A recording as a source: events up to a cursor, a clock, play and pause."""

    def __init__(self, replay: Replay, *, label: str, speed: float = DEFAULT_SPEED) -> None:
        self.replay = replay
        self.events = replay.events
        self.label = label
        self.rate = speed
        self.playing = False
        self._thresholds = Thresholds.of(replay.policy)
        self._walls = [event.wall for event in self.events]
        self.start = self._walls[0] if self._walls else 0.0
        self.end = self._walls[-1] if self._walls else 0.0
        self.clock = self.start
        #: events[:cursor] have happened; the updates have handed out events[:emitted].
        self.cursor = 0
        self._emitted = 0
        self._wake = asyncio.Event()
        self._played_at = time.monotonic()
        # Each breaker's views in order, by the index of the event after which it held.
        self._changes: dict[str, tuple[list[int], list[BreakerView]]] = {}
        for index, view in replay.changes:
            at, views = self._changes.setdefault(view.key, ([], []))
            at.append(index)
            views.append(view)
        self.approximate_counts = not replay.complete
        self.recorded = True

    # -- what a source answers -------------------------------------------------------------

    @property
    def thresholds(self) -> Thresholds:
        return self._thresholds

    @property
    def can_mark_fixed(self) -> bool:
        return False

    def now(self) -> float:
        return self.clock

    def can_write(self, ident: str) -> bool:
        return False  # a recording: nothing to reset

    def snapshot(self) -> list[BreakerView]:
        return self.fresh_views(list(self._changes))

    def fresh_views(self, ids: list[str]) -> list[BreakerView]:
        """The breakers' views as of the cursor (a probe's admission writes no line)."""
        shown = []
        for ident in ids:
            at, views = self._changes.get(ident, ([], []))
            n = bisect.bisect_left(at, self.cursor)
            if n:
                shown.append(views[n - 1])
        return shown

    def recent(self, limit: int) -> list[Event]:
        """Everything up to the cursor the cards tell from (a success that changed nothing
        aside): a replay reads its whole history, not the last few thousand lines."""
        return [e for e in self.events[: self.cursor] if e.type not in _QUIET or _told(e)]

    async def updates(self) -> AsyncIterator[list[Event] | Missed | Restart]:
        yield Missed(0)
        while True:
            if self.playing:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._until_next())
                self._play()
            else:
                await self._wake.wait()
            self._wake.clear()
            if self.cursor < self._emitted:
                self._emitted = self.cursor
                yield Restart()
            elif self.cursor > self._emitted:
                batch = self.events[self._emitted : self.cursor]
                self._emitted = self.cursor
                yield batch
            else:
                yield []  # the clock moved or the player changed: worth a repaint

    async def audit(self, key: str, limit: int = 200) -> list[Event]:
        rows = [e for e in self.events[: self.cursor] if e.key == key and _audited(e)]
        return rows[::-1][:limit]

    async def trip_history(self, key: str, limit: int = 2000) -> list[Event]:
        kept = set(TRIP_TYPES)
        rows = [e for e in self.events[: self.cursor] if e.key == key and e.type in kept]
        return rows[::-1][:limit]

    def audit_note(self, ident: str) -> str | None:
        what = "trace" if self.replay.complete else "audit log (it keeps no successes)"
        return f"The recorded {what}, up to the replay's clock; newest first."

    async def reset(self, key: str, actor: str, reason: str) -> None:
        raise PermissionError("a replay is read-only")

    async def mark_credential_fixed(self, key: str, actor: str) -> None:
        raise PermissionError("a replay is read-only")

    # -- the player ------------------------------------------------------------------------

    def status(self) -> str:
        """The player's line: playing or paused, its speed, where in the recording; then its
        keys (after two spaces)."""
        state = f"▶ ×{self.rate:g}" if self.playing else f"⏸ ×{self.rate:g}"
        if self.cursor >= len(self.events):
            state = "■ end"
        where = f"{self.cursor:,}/{len(self.events):,}"
        return f" {state} {where}   space play · ./, step · ]/[ ±1m · n/N change · +/- speed"

    def play_pause(self) -> None:
        if not self.playing and self.cursor >= len(self.events):
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
        self.cursor = max(0, min(len(self.events), self.cursor + events))
        self.clock = self._walls[self.cursor - 1] if self.cursor else self.start
        self._wake.set()

    def jump(self, seconds: float) -> None:
        self.seek(self.clock + seconds)

    def seek(self, wall: float) -> None:
        """The clock to `wall` (within the recording), every event up to it applied."""
        self.clock = max(self.start, min(self.end, wall))
        self.cursor = bisect.bisect_right(self._walls, self.clock)
        self._played_at = time.monotonic()
        self._wake.set()

    def next_change(self, direction: int = 1) -> None:
        """To the next (or previous) transition of any breaker, with every event of its
        moment (a trip's page, the other breakers it took along)."""
        self.playing = False
        if direction > 0:
            found = next(
                (i for i in range(self.cursor, len(self.events)) if _changes(self.events[i])),
                None,
            )
        else:
            last = self.cursor - 1
            while last >= 0 and self._walls[last] == self.clock and not _changes(self.events[last]):
                last -= 1  # the moment the cursor stands at
            found = next((i for i in range(last - 1, -1, -1) if _changes(self.events[i])), None)
            if found is None:
                self.seek(self.start)
                return
        if found is not None:
            self.seek(self._walls[found])
        else:
            self.seek(self.end)

    def _until_next(self) -> float:
        if self.cursor >= len(self.events):
            return PLAY_STEP
        left = (self._walls[self.cursor] - self.clock) / self.rate
        return max(0.0, min(PLAY_STEP, left))

    def _play(self) -> None:
        now = time.monotonic()
        self.clock = min(self.end, self.clock + (now - self._played_at) * self.rate)
        self._played_at = now
        self.cursor = bisect.bisect_right(self._walls, self.clock)
        if self.cursor >= len(self.events):
            self.playing = False


def _changes(event: Event) -> bool:
    return event.type in ev.TRANSITIONS or event.type in (
        ev.CREDENTIAL_REVOKED,
        ev.CREDENTIAL_RESTORED,
    )


def _told(event: Event) -> bool:
    """A call line the cards tell from: a failure, or one that changed its breaker."""
    return event.view is not None or event.fields.get("outcome") != "success"


def _audited(event: Event) -> bool:
    """What an audit log would keep of it: everything but a success."""
    return event.type != ev.CALL_COMPLETED or event.fields.get("outcome") != "success"


def load(args: argparse.Namespace) -> tuple[Replay, str]:
    if args.state_dir:
        directory = Path(args.state_dir).expanduser()
        return replay_audit(directory, args.policy), f"replay {directory.name or directory}"
    path = Path(args.trace).expanduser()
    return replay_trace(path, args.policy), f"replay {path.name}"
