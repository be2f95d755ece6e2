"""A recording played through the core as a cursor reaches its events, in bounded memory.

The player folds the events before its cursor through one `Folder` (the engine's breaker core,
`engine/replay.py`), decoding each from its store only as it is reached. Moving forward folds
on; every `CHECKPOINT` events a copy of the folder is kept (a few breakers each), so moving back
starts from the checkpoint before the target instead of the recording's start. Decoded events
are not kept, except the last `WINDOW` the cards tell from (failures, denials, transitions, a
success that changed its breaker): the board's history is read again from them and from the
transitions before them, read back from the store as an audit log would give them.

What it holds is bounded whatever the recording's length: the store's index (a few numbers
a line), the checkpoints (a few breakers per `CHECKPOINT` events) and the window.
"""

from __future__ import annotations

import bisect
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from breakerdeck.engine import events as ev
from breakerdeck.engine.events import BreakerView, Event, audit_form
from breakerdeck.engine.policy import AgentPolicy, ToolPolicy
from breakerdeck.engine.recorded.replay import (
    Folder,
    ReplayError,
    policy_for,
    probe_admissions,
    read_audit,
)
from breakerdeck.engine.recorded.traceindex import CHANGES, TraceIndex, TraceLineError

#: Events between two checkpoints of the folded state.
CHECKPOINT = 2048
#: Events before the cursor kept decoded (the told ones among them), for the board's history.
WINDOW = 2048


class Store(Protocol):
    """Where a recording's events are read one by one (a trace's index, an audit log's rows)."""

    @property
    def name(self) -> str: ...

    @property
    def epoch(self) -> float | None: ...

    @property
    def walls(self) -> Sequence[float]: ...

    @property
    def changes(self) -> Sequence[int]: ...

    @property
    def transitions(self) -> Sequence[int]: ...

    @property
    def admissions(self) -> dict[int, list[tuple[str, str, float]]]: ...

    @property
    def tripped_by(self) -> frozenset[Any] | set[Any]: ...

    @property
    def problems(self) -> list[str]: ...

    @property
    def done(self) -> bool: ...

    def count(self) -> int: ...

    def playable(self) -> int: ...

    def kind(self, index: int) -> tuple[str, bool]: ...

    def lines_of(self, key: str) -> Sequence[int]: ...

    def event(self, index: int) -> Event: ...

    def reach(self, wall: float) -> None: ...

    def start(self) -> None: ...

    def close(self) -> None: ...


class MemoryStore:
    """A recording read whole (an audit log: no trace index to read it from)."""

    done = True

    def __init__(self, events: list[Event], *, name: str, epoch: float | None = None) -> None:
        self.name = name
        self.epoch = epoch
        self.events = events
        self.walls = [e.wall for e in events]
        self.changes = [i for i, e in enumerate(events) if e.type in CHANGES]
        self.transitions = [i for i, e in enumerate(events) if e.type in ev.TRANSITIONS]
        self.admissions = probe_admissions(events, {e.seq: e.wall for e in events}, epoch)
        self.tripped_by = {e.fields.get("cause_seq") for e in events if e.type == ev.TRIPPED}
        self.problems: list[str] = []
        self._by_key: dict[str, list[int]] = {}
        for i, e in enumerate(events):
            self._by_key.setdefault(e.key, []).append(i)

    def count(self) -> int:
        return len(self.events)

    def playable(self) -> int:
        return len(self.events)

    def kind(self, index: int) -> tuple[str, bool]:
        event = self.events[index]
        return event.type, audit_form(event) is None

    def lines_of(self, key: str) -> Sequence[int]:
        return self._by_key.get(key, [])

    def event(self, index: int) -> Event:
        return self.events[index]

    def reach(self, wall: float) -> None:
        pass  # read whole

    def start(self) -> None:
        pass  # read whole

    def close(self) -> None:
        pass


class Playback:
    """The folded state after `position` events of a store, moved by `advance` and `move_to`."""

    def __init__(self, store: Store, policy: AgentPolicy | ToolPolicy, *, complete: bool) -> None:
        self.store = store
        self.policy = policy
        self.complete = complete
        self.folder = self._fresh()
        self.position = 0
        #: The folder as it was after `i * CHECKPOINT` events, for each i folded so far.
        self.checkpoints: list[Folder] = [self.folder.copy()]
        #: The told events among the last `WINDOW` folded, with their views: (index, event).
        self.told: deque[tuple[int, Event]] = deque(maxlen=WINDOW)
        #: Divergences handed out so far (the folder's list restarts with a checkpoint's).
        self.said = 0
        self._stop = threading.Event()
        self._ahead = threading.Thread(target=self._checkpoint, name="checkpoints", daemon=True)

    def start(self) -> None:
        """The store's scan and the checkpoints' fold begun in the background (once). The
        console calls it once its first screen is drawn: started before, the two threads took
        the interpreter from the app's start for about a second."""
        if not self.started:
            self.store.start()
            self._ahead.start()

    def _fresh(self) -> Folder:
        s = self.store
        return Folder(
            self.policy,
            complete=self.complete,
            epoch=s.epoch,
            admissions=s.admissions,
            tripped_by=s.tripped_by,
        )

    def views(self) -> list[BreakerView]:
        return self.folder.views()

    def advance(self, to: int) -> list[Event]:
        """Fold on to `to`: the events folded, each with its view where it changed one."""
        return list(self._fold(to))

    def move_to(self, to: int) -> None:
        """Fold to `to` keeping nothing but the window: from the checkpoint before it when it
        lies behind, or far enough ahead that the window starts past the position."""
        start = max(0, to - WINDOW)
        if to < self.position or start > self.position:
            at = min(start // CHECKPOINT, len(self.checkpoints) - 1)
            if at * CHECKPOINT > self.position or to < self.position:
                self.folder = self.checkpoints[at].copy()
                self.position = at * CHECKPOINT
                self.told.clear()
        for _ in self._fold(to):
            pass

    def _checkpoint(self) -> None:
        """Folds the recording ahead of the player in the background, keeping a copy every
        `CHECKPOINT` events, so that a jump anywhere folds at most a window and a checkpoint's
        span. Only this thread adds checkpoints; the player reads them."""
        store, folder, position = self.store, self.checkpoints[0].copy(), 0
        while not self._stop.is_set():
            goal = len(self.checkpoints) * CHECKPOINT
            if store.playable() < goal:
                if store.done:
                    return
                self._stop.wait(0.05)
                continue
            for index in range(position, goal):
                folder.step(store.event(index))
            position = goal
            self.checkpoints.append(folder.copy())

    @property
    def started(self) -> bool:
        """Whether `start` began the background reading."""
        return self._ahead.ident is not None

    @property
    def checkpointed(self) -> bool:
        """Whether the background fold (begun) reached the recording's end."""
        return self.started and not self._ahead.is_alive()

    def close(self) -> None:
        self._stop.set()
        if self.started:
            self._ahead.join()
        self.store.close()

    def _fold(self, to: int) -> Iterator[Event]:
        store, folder = self.store, self.folder
        for index in range(self.position, to):
            event, _changed = folder.step(store.event(index))
            self.position = index + 1
            if _told(event):
                self.told.append((index, event))
            yield event

    def divergences(self) -> list[str]:
        """The core's disagreements with the recording found since last asked."""
        found = self.folder.replay.divergences
        fresh = found[self.said :]
        self.said = len(found)
        return fresh

    def recent(self, limit: int) -> list[Event]:
        """What the board's history is read from at the position: the last `limit` transitions
        before the window, read back as an audit log gives them, then the window's told
        events."""
        first = self.told[0][0] if self.told else self.position
        transitions = self.store.transitions
        end = bisect.bisect_left(transitions, first)
        before = [self.store.event(transitions[i]) for i in range(max(0, end - limit), end)]
        return before + [e for _, e in self.told]

    def rows(self, key: str, limit: int, kinds: frozenset[str] | None = None) -> list[Event]:
        """The key's rows before the position as its audit log has them (no quiet calls),
        newest first; only `kinds` when given (a failure being a `call.failed` row)."""
        store = self.store
        lines = store.lines_of(key)
        found: list[Event] = []
        for at in range(bisect.bisect_left(lines, self.position) - 1, -1, -1):
            index = lines[at]
            kind, quiet = store.kind(index)
            if quiet:
                continue
            if (
                kinds is not None
                and kind not in kinds
                and not (kind == ev.CALL_COMPLETED and ev.CALL_FAILED in kinds)
            ):
                continue  # told from the index alone: not decoded
            row = audit_form(store.event(index))
            if row is None or (kinds is not None and row.type not in kinds):
                continue
            found.append(row)
            if len(found) >= limit:
                break
        return found


def _told(event: Event) -> bool:
    """An event the cards tell from: all but a call that succeeded and changed nothing."""
    if event.type != ev.CALL_COMPLETED:
        return True
    return event.view is not None or event.fields.get("outcome") != "success"


def play_trace(path: Path, policy: str | None = None) -> Playback:
    """A trace played as it is read, its first chunk indexed (`Playback.start` scans on)."""
    try:
        index = TraceIndex.open(path)
    except OSError as error:
        raise ReplayError(f"cannot read {path}: {error.strerror or error}") from None
    except TraceLineError as error:
        raise ReplayError(str(error)) from None
    return Playback(index, policy_for(index.by_key, policy), complete=True)


def play_audit(state_dir: Path, policy: str | None = None) -> Playback:
    """A state dir's audit log (any door's), read whole; successes are not in it."""
    events = read_audit(state_dir / "audit.sqlite3")
    if not events:
        raise ReplayError(f"the audit log in {state_dir} holds no events")
    keys = dict.fromkeys(e.key for e in events[:2000])
    store = MemoryStore(events, name=str(state_dir))
    return Playback(store, policy_for(keys, policy), complete=False)
