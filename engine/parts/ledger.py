"""The ledger: sequence numbers and call numbers, their reservation in the mark file, and the
hand-off of each numbered event to the audit log and the outbox in seq order.

Numbering takes no lock: a seq is drawn from an atomic counter under the key's lock, and the
event is posted under its number once it is complete. After the lock, whichever caller finds
the next seq waiting hands events on, one at a time in seq order, until a gap (a number drawn,
its event not yet posted: its poster hands it on); a caller that finds another handing leaves
its events to it, as Polly runs its callbacks. So the audit log, the trace and the feed see
seqs strictly increasing, with no gaps.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from breakerdeck.engine import events as ev
from breakerdeck.engine.errors import StateDirError
from breakerdeck.engine.events import CallCompleted, CallDenied, Event
from breakerdeck.engine.outcomes import OutcomeClass
from breakerdeck.engine.parts.outbox import Outbox
from breakerdeck.engine.storage import statedir
from breakerdeck.engine.storage.audit import AuditLog
from breakerdeck.engine.storage.store import Problems, VerdictStore

MARK_FILE = "mark.json"
LOCK_FILE = "lock"

#: Seqs and call numbers are reserved this many ahead in the mark file, so a process killed
#: without closing never hands out a number again: the next one starts past the reservation.
NUMBER_BLOCK = 10_000

_SUCCESS = OutcomeClass.SUCCESS


class Ledger:
    def __init__(self, wall_clock: Callable[[], float], problems: Problems, outbox: Outbox) -> None:
        #: The engine's wall clock, as cheap as it comes (`Parts.wall`).
        self.wall = wall_clock
        self._problems = problems
        self._outbox = outbox
        self.audit: AuditLog | None = None
        self._store: VerdictStore | None = None
        self._seqs = itertools.count(1)
        self._calls = itertools.count(1)
        #: Draws the next call number: the counter itself while no number needs reserving on
        #: disk (no state dir); `next_call` from `open` on.
        self.draw_call: Callable[[], int] = self._calls.__next__
        #: The last seq numbered (see `last`), and the last handed on: every event up to it
        #: is in the audit log's queue and was given to the outbox. Only the one handing
        #: writes `handed`.
        self.numbered = self.handed = 0
        self._posted: dict[int, Event] = {}
        self._handing = threading.Lock()
        # Numbers below these are reserved on disk (or need no reservation: no state dir).
        self._seq_refill = self._calls_refill = float("inf")
        self._seq_ceiling = self._calls_ceiling = 0
        self._seq_saved = 0
        self._reserving = threading.Lock()
        self._mark_file: Path | None = None
        self._lock_fd: int | None = None

    def open(self, directory: Path, audit: AuditLog, store: VerdictStore) -> None:
        """Take the dir's lock and reserve numbers past the last run's."""
        self._lock_fd = _lock_state_dir(directory)
        self.audit, self._store = audit, store
        self._outbox.audited()
        self._mark_file = directory / MARK_FILE
        mark = read_mark(directory, self._problems)
        self.numbered = self.handed = max(audit.max_seq(), mark.seq)
        self._seqs = itertools.count(self.handed + 1)
        self._calls = itertools.count(mark.calls + 1)
        self.draw_call = self.next_call
        self._seq_ceiling = self.handed + NUMBER_BLOCK
        self._calls_ceiling = mark.calls + NUMBER_BLOCK
        self._set_refills()
        self._save_mark(self._seq_ceiling, self._calls_ceiling)

    def next_call(self) -> int:
        number = next(self._calls)
        if number >= self._calls_refill:
            self._reserve_more(calls=number)
        return number

    def post(self, event: Event) -> None:
        """Under the key's lock, once the event is complete: its seq (and its view's), its
        time unless a cause gave it one; it waits to be handed on (`deliver`, after the lock)."""
        event.seq = seq = self.numbered = next(self._seqs)
        if seq >= self._seq_refill:
            self._reserve_more(seq=seq)
        if not event.wall:
            event.wall = self.wall()
        view = event.view
        if view is not None:
            view.seq = seq
        self._posted[seq] = event

    def last(self) -> int:
        """The last seq numbered: exact while no event is being numbered (every key's lock
        held, or one thread). `numbered` alone, read on the call path, may trail it for a
        moment when two keys number at once."""
        return max(self.numbered, self.handed, *list(self._posted))

    def deliver(self) -> None:
        """After the key's lock is let go: hand the posted events on, in seq order, to the
        audit log (only what it keeps is built as its line) and the outbox; one at a time."""
        posted = self._posted
        while self.handed + 1 in posted:
            if not self._handing.acquire(False):
                return  # the one handing looks again after letting go
            try:
                audit, hand_out = self.audit, self._outbox.hand_out
                seq = self.handed + 1
                while seq in posted:  # only the one handing takes events out
                    event = posted.pop(seq)
                    self.handed = seq
                    seq += 1
                    if audit is not None:
                        if type(event) is CallDenied:  # never relayed: a refusal is our own
                            audit.append_denied(event)
                        elif not event.relayed:
                            success = type(event) is CallCompleted and event.result.cls is _SUCCESS
                            kept = None if success else ev.audit_form(event)
                            if kept is not None:
                                audit.append(kept)
                    hand_out(event)
            finally:
                self._handing.release()

    def handed_by(self, seq: int, deadline: float) -> bool:
        """Whether every event up to `seq` is handed on by `deadline` (real monotonic time):
        one posted after a gap waits for the gap's poster."""
        while self.handed < seq:
            self.deliver()
            if time.monotonic() >= deadline:
                return False
            time.sleep(0)
        return True

    def close(self) -> None:
        """Every number used is on disk now, so the next run may continue without a gap."""
        if self._mark_file is not None:
            self._save_mark(self.last(), next(self._calls) - 1)
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    def _reserve_more(self, *, seq: int = 0, calls: int = 0) -> None:
        """Move the reservations a block ahead and save them off the call path."""
        with self._reserving:
            if seq < self._seq_refill and calls < self._calls_refill:
                return  # another thread got here first
            seq = max(seq, self.numbered)
            self._seq_ceiling = max(self._seq_ceiling, seq + NUMBER_BLOCK)
            self._calls_ceiling = max(self._calls_ceiling, calls + NUMBER_BLOCK)
            self._set_refills()
            if seq > self._seq_saved:
                self._problems.add(
                    f"Seqs past {self._seq_saved} were handed out before their reservation "
                    "reached the disk: a crash now could repeat them."
                )
            seq_ceiling, calls_ceiling = self._seq_ceiling, self._calls_ceiling
        if self._store is not None:
            self._store.run_on_writer(lambda: self._save_mark(seq_ceiling, calls_ceiling))

    def _set_refills(self) -> None:
        """Halfway through a block the next one is reserved, so the save has time to land."""
        self._seq_refill = self._seq_ceiling - NUMBER_BLOCK // 2
        self._calls_refill = self._calls_ceiling - NUMBER_BLOCK // 2

    def _save_mark(self, seq: int, calls: int) -> None:
        assert self._mark_file is not None
        mark = {"seq": seq, "wall": self.wall(), "calls": calls}
        try:
            statedir.write_private(self._mark_file, json.dumps(mark))
        except OSError as error:
            self._problems.add(f"{self._mark_file}: could not be written ({error}).")
            return
        self._seq_saved = max(self._seq_saved, seq)


@dataclass(frozen=True, slots=True)
class Mark:
    """The numbers a run may have handed out (its reservation; after a clean close, the last
    used) and the wall time it was written."""

    seq: int = 0
    wall: float | None = None
    calls: int = 0


def read_mark(directory: Path, problems: Problems | None = None) -> Mark:
    """The numbers a previous run reserved (or, after a clean close, used), and when."""
    path = directory / MARK_FILE
    try:
        data = json.loads(statedir.read_private(path))
        return Mark(int(data["seq"]), float(data["wall"]), int(data.get("calls", 0)))
    except StateDirError as error:
        if isinstance(error.__cause__, FileNotFoundError):
            return Mark()
        problem = f"{path}: not used ({error}); continuing from the audit log"
    except (ValueError, KeyError, TypeError) as error:
        problem = f"{path}: unreadable mark ({error}); continuing from the audit log"
    if problems is not None:
        problems.add(problem)
    return Mark()


def _lock_state_dir(directory: Path) -> int:
    """An exclusive lock for this process's life: two engines on one dir would interleave."""
    path = directory / LOCK_FILE
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as error:
        raise StateDirError(f"state dir {directory}: cannot open {path} ({error})") from error
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        os.close(fd)
        by = f" (pid {holder})" if holder.isdigit() else ""
        raise StateDirError(
            f"state dir {directory} is in use by another breakerdeck process{by}: "
            "each process needs a state dir of its own"
        ) from error
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd
