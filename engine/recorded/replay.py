"""Recorded events folded through the breaker core again: what a console replays.

A headless trace (or any door's `--events` file) holds every call, so folding its lines through
`breaker.Breaker`, one per key, the way the engine drove it gives back each breaker as it was
after each line; the recorded transitions are checked against the core's (they agree, or the
difference is reported). An audit log keeps no successes: there a recorded recovery stands for
the success behind it, a counted failure the log shows did not trip the breaker means a success
came before it (so the counter is approximate, and said to be), and a recorded transition the
core would not have made is taken as the record says: what the log proves.

Nothing here decides anything the core does not: the transitions are `Breaker`'s, the views
are built from its state the way the engine builds them.
"""

from __future__ import annotations

import copy
import json
import shutil
import sqlite3
import tempfile
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from breakerdeck.engine import events as ev
from breakerdeck.engine.core.breaker import Breaker, BreakerState, Hold, picture
from breakerdeck.engine.events import BreakerView, Event, Transition, decoded
from breakerdeck.engine.outcomes import SUCCESS, Outcome, OutcomeClass
from breakerdeck.engine.policy import AgentPolicy, ToolPolicy
from breakerdeck.engine.recorded.traceindex import TraceLineError, line_event, parse_iso, parse_line
from breakerdeck.engine.state import State

_CALLS = frozenset({ev.CALL_COMPLETED, ev.CALL_FAILED})
#: Transitions a call's line causes, written right after it (`cause_seq`).
_CAUSED = frozenset({ev.TRIPPED, ev.REOPENED, ev.RECOVERED, ev.PAGE})
#: A probe that has not reported back never expires in a replay: the record says when it did.
_NO_LEASE = float("inf")
#: Recorded times are rounded to the millisecond: a half-open this close to its due time is it.
_ROUNDING = 0.002
#: Audit rows read at a time.
_BATCH = 1000


class ReplayError(ValueError):
    """A recording that cannot be read (not a trace, not an audit log): the message says why."""


@dataclass(slots=True)
class Replay:
    """The recorded events, in order, each carrying the breaker's view after it where the core's
    breaker changed (and on a key's first line): what a console reads as live events."""

    events: list[Event]
    policy: AgentPolicy | ToolPolicy
    #: A trace (every call) or an audit log (no successes: counters approximate).
    complete: bool
    #: Where a recorded transition is not what the core made of the recorded calls.
    divergences: list[str] = field(default_factory=list)
    #: Keys whose counter is approximate (a success the audit log does not keep came first).
    approximate: set[str] = field(default_factory=set)
    #: The recording's epoch (wall of its t = 0), when known.
    epoch: float | None = None
    #: Every change of a breaker: (the index of the event after which, its view then). Also
    #: a probe's admission, which writes no line of its own.
    changes: list[tuple[int, BreakerView]] = field(default_factory=list)


def read_trace(lines: Iterable[str], *, name: str = "trace") -> tuple[list[Event], float]:
    """A trace's lines, all of them, as events (wall = the recording's epoch + `t`) and that
    epoch: the whole-file read a replay's index is checked against."""
    events: list[Event] = []
    epoch: float | None = None
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            line = parse_line(raw)
        except TraceLineError as error:
            raise ReplayError(f"{name}, line {number}: {error}") from None
        if epoch is None:
            epoch = round(parse_iso(str(line["at"])) - float(line["t"]), 3)
        events.append(line_event(line, epoch))
    if epoch is None:
        raise ReplayError(f"{name} holds no events")
    return events, epoch


def read_audit(path: Path, types: Collection[str] | None = None) -> Iterator[Event]:
    """The rows of an audit log (those of `types`, or all), oldest first, read as they are
    taken, a batch at a time (a log of any size), without writing to it (the engine that
    keeps it may be running). A log SQLite will not read in place (a directory we may not
    write) is read from a copy."""
    if not path.exists():
        raise ReplayError(f"no audit log at {path}")
    # With its write-ahead log present (an engine has it open, or died with it) SQLite reads it
    # read-only beside that engine; without one the file is all there is, and is read as it
    # is, so that no file is made in the state dir.
    wal = Path(f"{path}-wal").exists()
    rows = _read_rows(f"file:{path}?mode=ro" if wal else f"file:{path}?immutable=1", types, path)
    try:
        first = next(rows, None)  # opens the file and asks: a log read in place fails here
    except sqlite3.Error:
        pass
    else:
        if first is not None:
            yield first
            yield from _to_the_end(rows, path)
        return
    with tempfile.TemporaryDirectory(prefix="breakerdeck-replay-") as copied:
        for suffix in ("", "-wal", "-shm"):
            source = Path(f"{path}{suffix}")
            if source.exists():
                try:
                    shutil.copyfile(source, Path(copied) / f"audit.sqlite3{suffix}")
                except OSError as error:
                    raise ReplayError(f"cannot read {source}: {error.strerror or error}") from None
        uri = f"file:{Path(copied) / 'audit.sqlite3'}"
        yield from _to_the_end(_read_rows(uri, types, path), path)


def _to_the_end(rows: Iterator[Event], path: Path) -> Iterator[Event]:
    try:
        yield from rows
    except sqlite3.Error as error:
        raise ReplayError(f"{path} is not a readable audit log: {error}") from None


def _read_rows(uri: str, types: Collection[str] | None, path: Path) -> Iterator[Event]:
    where, kinds = "", list(types or ())
    if types is not None:
        where = f"WHERE type IN ({', '.join('?' * len(kinds))})"
    conn = sqlite3.connect(uri, uri=True)
    try:
        cursor = conn.execute(
            f"SELECT seq, type, key, agent, wall, fields FROM events {where} ORDER BY seq, rowid",
            kinds,
        )
        while rows := cursor.fetchmany(_BATCH):
            for s, t, k, a, w, f in rows:
                try:
                    fields = json.loads(f)
                except (ValueError, TypeError):
                    fields = None
                if not isinstance(fields, dict):
                    raise ReplayError(f"{path}: the row of seq {s} is not an audit row")
                yield decoded(s, t, k, a, w, fields)
    finally:
        conn.close()


def policy_for(keys: Iterable[str], asked: str | None = None) -> AgentPolicy | ToolPolicy:
    """The policy the recording ran under: as asked, else `tool` when its keys read
    `<backend>@<credential>`, else `agent`."""
    kind = asked or ("tool" if any("@" in key for key in keys) else "agent")
    return ToolPolicy() if kind == "tool" else AgentPolicy()


@dataclass(slots=True)
class _Key:
    breaker: Breaker
    agents: list[str] = field(default_factory=list)
    paused: bool = False
    #: The probe the core holds: (call id, admitted wall).
    probe: tuple[str, float] | None = None
    #: Transitions the core made on the last call, waiting for their recorded lines.
    owed: list[Transition] = field(default_factory=list)
    shown: BreakerView | None = None
    #: `enforce` or `shadow`: as the last `circuit_breaker.mode` set it, or as the key's last
    #: transition (`"shadow": true`) or would-be refusal proves it.
    mode: str = "enforce"


class Folder:
    """The core driven one event at a time, as the engine drove it: what a whole-file fold
    and a replay played as it is read both run. Its state is a few breakers, so a copy of it
    (`copy`) is a checkpoint a replay moves back to without folding from the start."""

    def __init__(
        self,
        policy: AgentPolicy | ToolPolicy,
        *,
        complete: bool,
        epoch: float | None,
        admissions: dict[int, list[tuple[str, str, float]]],
        tripped_by: set[Any] | frozenset[Any] = frozenset(),
    ) -> None:
        #: Where divergences and approximate keys are gathered; its events stay empty.
        self.replay = Replay([], policy, complete, epoch=epoch)
        self.keys: dict[str, _Key] = {}
        self.admissions = admissions
        self.tripped_by = tripped_by

    def copy(self) -> Folder:
        twin = copy.copy(self)
        policy = self.replay.policy
        memo = {id(policy): policy}
        twin.keys = {
            key: _Key(
                copy.deepcopy(k.breaker, memo),
                list(k.agents),
                k.paused,
                k.probe,
                list(k.owed),
                k.shown,
                k.mode,
            )
            for key, k in self.keys.items()
        }
        twin.replay = replace(
            self.replay,
            divergences=list(self.replay.divergences),
            approximate=set(self.replay.approximate),
        )
        return twin

    def views(self) -> list[BreakerView]:
        """Each breaker's view after the last event folded (a key with none yet aside)."""
        return [k.shown for k in self.keys.values() if k.shown is not None]

    def step(self, event: Event) -> tuple[Event, list[BreakerView]]:
        """The event with the view of its breaker after it (where it changed), and every
        view that changed with it."""
        replay, keys, policy = self.replay, self.keys, self.replay.policy
        changed: list[BreakerView] = []
        k = keys.get(event.key)
        if k is None:
            k = keys[event.key] = _Key(Breaker(event.key, policy))
        if event.type in _CALLS:
            _call(replay, k, event, self.tripped_by)
        elif event.type in ev.TRANSITIONS:
            if event.type != ev.MODE:  # a shadow breaker's transitions say so
                k.mode = "shadow" if event.fields.get("shadow") else "enforce"
            _transition(replay, k, event)
        elif event.type == ev.CALL_WOULD_DENY:
            k.mode = "shadow"  # only a shadow breaker would refuse without refusing
        elif event.type == ev.CREDENTIAL_REVOKED:
            k.paused = True
        elif event.type == ev.CREDENTIAL_RESTORED:
            k.paused = False
        _agent(k, event, policy)
        admitted = []
        for key, call_id, wall in self.admissions.get(event.seq, ()):
            other = keys.setdefault(key, _Key(Breaker(key, policy)))
            _admit(replay, other, call_id, wall)
            if other is not k:
                admitted.append(other)
        view = _view(k, event.seq)
        # As the engine does, a change's view rides on the last line it writes: a call that
        # tripped its breaker carries none, its `tripped` line (or the page after) does.
        if k.owed and k.shown is not None:
            pass
        elif k.shown is None or _differs(k.shown, view):
            k.shown = view
            changed.append(view)
            event = decoded(event.seq, event.type, event.key, event.agent, event.wall,
                            event.fields, view)  # fmt: skip
        # A probe admitted on another key writes no line: its view changed all the same.
        for other in admitted:
            view = _view(other, event.seq)
            if other.shown is None or _differs(other.shown, view):
                other.shown = view
                changed.append(view)
        return event, changed


def fold(
    events: Sequence[Event],
    policy: AgentPolicy | ToolPolicy,
    *,
    complete: bool,
    epoch: float | None = None,
) -> Replay:
    """Each event with the view of its breaker after it, the core driven as the engine did."""
    walls = {e.seq: e.wall for e in events}
    tripped_by = {e.fields.get("cause_seq") for e in events if e.type == ev.TRIPPED}
    folder = Folder(
        policy,
        complete=complete,
        epoch=epoch,
        admissions=probe_admissions(events, walls, epoch),
        tripped_by=tripped_by,
    )
    replay = folder.replay
    for event in events:
        index = len(replay.events)
        shown, changed = folder.step(event)
        replay.changes.extend((index, view) for view in changed)
        replay.events.append(shown)
    return replay


def probe_admissions(
    events: Sequence[Event], walls: dict[int, float], epoch: float | None
) -> dict[int, list[tuple[str, str, float]]]:
    """Probes by the seq of the line after which each was admitted: (key, call id, wall)."""
    after: dict[int, list[tuple[str, str, float]]] = {}
    for e in events:
        f = e.fields
        if e.type not in _CALLS or f.get("admitted_as") != "probe":
            continue
        seq = f.get("admitted_seq")
        if not isinstance(seq, int) or seq not in walls:
            continue  # admitted before the recording begins: taken at its completion
        admitted_t = f.get("admitted_t")
        wall = epoch + admitted_t if epoch is not None and admitted_t is not None else walls[seq]
        after.setdefault(seq, []).append((e.key, str(f.get("call_id")), wall))
    return after


def _admit(replay: Replay, k: _Key, call_id: str, wall: float) -> None:
    if k.probe is not None and k.probe[0] == call_id:
        return
    due = k.breaker.reopens_at
    if due is not None and 0 < due - wall <= _ROUNDING:
        wall = due  # admitted when due: the recorded time is rounded to the millisecond
    admission, transitions = k.breaker.admit(call_id, wall, _NO_LEASE)
    if admission.as_probe:
        k.probe = (call_id, wall)
    for transition in transitions:  # a half-open the recording wrote before the admission
        replay.divergences.append(
            f"{k.breaker.key}: the core made {transition.type} admitting probe {call_id}; "
            "the recording had no such line before it"
        )


def _outcome(f: dict[str, Any]) -> Outcome:
    try:
        cls = OutcomeClass(str(f.get("outcome")))
    except ValueError:  # an outcome of another door (gateway_busy, platform_answer): uncounted
        cls = OutcomeClass.UPSTREAM_ERROR
    counted = bool(f.get("counted"))
    retry_after = f.get("retry_after_seconds")
    return Outcome(cls, counted, retry_after, str(f.get("fault") or ""))


def _call(replay: Replay, k: _Key, event: Event, tripped_by: set[Any] | frozenset[Any]) -> None:
    f = event.fields
    if f.get("admitted_as") is None:
        return  # refused before the breaker: the core never saw it
    call_id = str(f.get("call_id"))
    breaker = k.breaker
    if f.get("probe") and (k.probe is None or k.probe[0] != call_id):
        _admit(replay, k, call_id, event.wall)  # admitted before the recording began
    outcome = _outcome(f)
    if (
        not replay.complete
        and outcome.counted
        and breaker.state is State.CLOSED
        and event.seq not in tripped_by
        and _would_trip(breaker, call_id, outcome, event.wall)
    ):
        # The log shows this failure did not trip it: a success the log does not keep
        # came between (the core is told of it, and the counter is approximate).
        breaker.record(f"unlogged-success-{event.seq}", SUCCESS, event.wall)
        replay.approximate.add(breaker.key)
    was_probe = breaker.is_probe(call_id)
    k.owed = list(breaker.record(call_id, outcome, event.wall))
    if was_probe or breaker.probe_id is None:
        k.probe = None


def _would_trip(breaker: Breaker, call_id: str, outcome: Outcome, wall: float) -> bool:
    trial = Breaker(breaker.key, breaker.policy)
    trial.take(breaker.snapshot(), probe_id=breaker.probe_id)
    return any(t.type == ev.TRIPPED for t in trial.record(call_id, outcome, wall))


def _transition(replay: Replay, k: _Key, event: Event) -> None:
    kind, f, breaker = event.type, event.fields, k.breaker
    if kind in _CAUSED and f.get("cause_seq") is not None:
        if k.owed and k.owed[0].type == kind:
            k.owed.pop(0)  # the core made it too
            return
        if kind == ev.RECOVERED and not replay.complete:
            _succeed(k, event.wall)  # the success behind it is not in an audit log
            return
        replay.divergences.append(
            f"{breaker.key}: the recording has {kind} at seq {event.seq}; the core made "
            f"{[t.type for t in k.owed] or 'nothing'} of the call before it"
        )
        k.owed = []
        _adopt(k, event)
        return
    if kind == ev.HALF_OPEN:
        due = breaker.reopens_at
        if due is not None and due - event.wall <= _ROUNDING and breaker.poll(max(event.wall, due)):
            k.probe = None
            return
        if breaker.state is not State.HALF_OPEN:
            replay.divergences.append(
                f"{breaker.key}: half-open at seq {event.seq}, but the core's breaker was "
                f"{breaker.state.value} (due {due})"
            )
            _adopt(k, event)
        return
    if kind == ev.RESET:
        breaker.reset(str(f.get("actor")), str(f.get("reason")))
        k.probe = None
        return
    if kind == ev.RESTORED:
        _restored(k, event, replay.epoch)
        return
    if kind in (ev.HELD, ev.RELEASED, ev.MODE):
        _operator(k, event, replay.epoch)
        return
    # A transition no call of this recording caused: relayed from a replica sharing the
    # breaker, or a success or probe outcome the log does not hold. Taken as recorded.
    if kind == ev.RECOVERED:
        _succeed(k, event.wall)
    else:
        _adopt(k, event)


def _operator(k: _Key, event: Event, epoch: float | None) -> None:
    """An operator's hold, release or mode switch, taken as recorded (the line that follows a
    release, its half-open or reset, is folded as any other)."""
    f, breaker = event.fields, k.breaker
    if event.type == ev.MODE:
        k.mode = str(f.get("to") or k.mode)
        return
    k.probe = None
    if event.type == ev.RELEASED:
        if breaker.state is State.HELD:
            breaker.release(str(f.get("actor")), "", close=False)
        return
    until = _held_until(f, epoch)
    breaker.hold_open(Hold(str(f.get("actor")), str(f.get("reason") or ""), until, until))


def _held_until(fields: dict[str, Any], epoch: float | None) -> float:
    """A hold's end as a wall time: an audit row keeps it as a UTC time, a trace line in the
    run's seconds (`until_t`)."""
    until = fields.get("until")
    if isinstance(until, str):
        return parse_iso(until)
    return (epoch or 0.0) + float(fields.get("until_t") or 0.0)


def _succeed(k: _Key, wall: float) -> None:
    if k.breaker.state is not State.CLOSED:
        k.breaker.record(k.probe[0] if k.probe else "unlogged-success", SUCCESS, wall)
    k.probe = None


def _adopt(k: _Key, event: Event) -> None:
    """Take a recorded transition as the record says: what it proves."""
    breaker, f, wall = k.breaker, event.fields, event.wall
    state = breaker.snapshot()
    kind = event.type
    if kind == ev.TRIPPED:
        cls = _class(f.get("failure_class"))
        state = replace(
            state,
            state=State.OPEN,
            count=int(f.get("count") or state.count),
            opened_at=wall,
            cooldown=float(f.get("cooldown_seconds") or breaker.policy.trip_cooldown()),
            failed_probes=0,
            paged=False,
            trip_cause=cls or state.trip_cause,
        )
    elif kind == ev.REOPENED:
        state = replace(
            state,
            state=State.OPEN,
            opened_at=wall,
            cooldown=float(f.get("cooldown_seconds") or state.cooldown),
            failed_probes=state.failed_probes + 1,
        )
    elif kind == ev.HALF_OPEN:
        state = replace(state, state=State.HALF_OPEN)
    elif kind == ev.PAGE:
        state = replace(state, paged=True)
    elif kind in (ev.RECOVERED, ev.RESET):
        breaker.reset("replay", "as recorded")
        k.probe = None
        return
    breaker.take(state)
    k.probe = None


def _class(value: object) -> OutcomeClass | None:
    try:
        return OutcomeClass(str(value))
    except ValueError:
        return None


def _restored(k: _Key, event: Event, epoch: float | None) -> None:
    """A verdict restored at start: the breaker becomes what was saved (times in that run's
    `t`; an audit log's run began about when it wrote this line)."""
    f = event.fields
    start = epoch if epoch is not None else event.wall

    def wall(t: object) -> float | None:
        return None if t is None else start + float(t)  # type: ignore[arg-type]

    try:
        state = State(str(f.get("state")))
    except ValueError:
        state = State.CLOSED
    saved = BreakerState(
        state=State.OPEN if state is State.HALF_OPEN else state,
        count=int(f.get("count") or 0),
        last_failure_at=wall(f.get("last_failure_t")),
        last_failure_detail="",
        opened_at=wall(f.get("opened_t")),
        reopens_at=None,
        cooldown=float(f.get("cooldown_seconds") or 0.0),
        failed_probes=int(f.get("failed_probes") or 0),
        paged=bool(f.get("paged")),
        rate_limited_streak=int(f.get("rate_limited_streak") or 0),
        last_retry_after=f.get("last_retry_after_seconds"),
        trip_cause=k.breaker.trip_cause,
    )
    k.breaker.take(saved)
    k.probe = None


def _agent(k: _Key, event: Event, policy: AgentPolicy | ToolPolicy) -> None:
    """The agents the engine names on the key's views: under `agent` the key's own; under
    `tool` each calling agent, as its first call arrives."""
    if isinstance(policy, AgentPolicy):
        if not k.agents:
            k.agents.append(event.key)
        return
    if event.type in (*_CALLS, ev.CALL_DENIED) and event.agent and event.agent not in k.agents:
        k.agents.append(event.agent)


def _view(k: _Key, seq: int) -> BreakerView:
    """The key's breaker as the engine's `_view` pictures it (its times are walls here)."""
    b = k.breaker.snapshot()
    probe = k.probe[1] if k.probe is not None and b.state is State.HALF_OPEN else None
    return picture(
        k.breaker.key,
        tuple(k.agents),
        b,
        paused=k.paused,
        seq=seq,
        probe_since=probe,
        mode=k.mode,
    )


def _differs(a: BreakerView, b: BreakerView) -> bool:
    """Whether two views picture the breaker differently (their seqs aside)."""
    return (
        a.state != b.state
        or a.count != b.count
        or a.last_failure_at != b.last_failure_at
        or a.opened_at != b.opened_at
        or a.cooldown != b.cooldown
        or a.failed_probes != b.failed_probes
        or a.paged != b.paged
        or a.paused != b.paused
        or a.probe_since != b.probe_since
        or a.trip_cause != b.trip_cause
        or a.agents != b.agents
        or a.held_until != b.held_until
        or a.mode != b.mode
    )


def replay_trace(path: Path, policy: str | None = None) -> Replay:
    """A trace file folded through the core."""
    try:
        with path.open(encoding="utf-8") as lines:
            events, epoch = read_trace(lines, name=str(path))
    except OSError as error:
        raise ReplayError(f"cannot read {path}: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise ReplayError(f"{path} is not UTF-8 text: {error}") from None
    return fold(events, policy_for(_first_keys(events), policy), complete=True, epoch=epoch)


def replay_audit(state_dir: Path, policy: str | None = None) -> Replay:
    """A state dir's audit log (any door's) folded through the core; successes are not in it."""
    events = list(read_audit(state_dir / "audit.sqlite3"))
    if not events:
        raise ReplayError(f"the audit log in {state_dir} holds no events")
    return fold(events, policy_for(_first_keys(events), policy), complete=False)


def _first_keys(events: Sequence[Event]) -> list[str]:
    return [e.key for e in events[:2000]]
