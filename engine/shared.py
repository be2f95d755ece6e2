"""One agent's breaker across gateway replicas, on Redis (DESIGN, "Replicas").

Each read-modify-write of a shared breaker is one Lua script (`shared.lua`) that takes `now`
from the calling engine's wall clock, so replicas never interleave and tests run on simulated
time against a real Redis. Every script that changes a breaker publishes the result on one
channel; each replica's listener thread applies what the others did, so a healthy call makes no
round trip. When Redis cannot be reached the store says so (`lost`) and the engine decides
locally; the listener keeps trying, and on return the engine reconciles key by key.

Nothing read from Redis is trusted: every answer is validated here (a pydantic model), its
times and counts are read within the verdict store's bounds, and its text made printable.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable
from functools import cache
from importlib.resources import files
from typing import Any, Literal

import redis
from pydantic import BaseModel, ConfigDict, Field
from redis.backoff import NoBackoff
from redis.client import PubSub
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot
from redis.exceptions import RedisClusterException
from redis.retry import Retry
from redis.sentinel import Sentinel, SentinelConnectionPool

from breakerdeck.engine import events as ev
from breakerdeck.engine.core import holds
from breakerdeck.engine.core.breaker import BreakerState, Hold
from breakerdeck.engine.core.verdict import Verdict, bounded
from breakerdeck.engine.events import (
    HalfOpened,
    Held,
    ModeChanged,
    Paged,
    Recovered,
    Released,
    Reopened,
    Reset,
    Transition,
    Tripped,
)
from breakerdeck.engine.outcomes import OutcomeClass
from breakerdeck.engine.parts import modes
from breakerdeck.engine.parts.decide import Arg
from breakerdeck.engine.parts.operations import Parts
from breakerdeck.engine.policy import MAX_DEADLINE_SECONDS, AgentPolicy
from breakerdeck.engine.replicas.fleet import Fleet
from breakerdeck.engine.replicas.replica import (
    MAX_SHARED_KEYS,
    Behind,
    Foreign,
    Missing,
    OnChange,
    OnJoin,
    Reply,
    Shared,
)
from breakerdeck.engine.replicas.store_url import StoreUrl, parse_store_url
from breakerdeck.engine.state import State
from breakerdeck.engine.storage.store import Problems
from breakerdeck.engine.text import printable

log = logging.getLogger(__name__)

SCRIPT = (files("breakerdeck.engine") / "shared.lua").read_text(encoding="utf-8")

#: Redis's expiry only collects garbage: a breaker untouched for a day (real time) is gone.
GARBAGE_AFTER_MS = 86_400_000

#: How often the listener tries a lost store again, and pings a quiet one (real seconds).
RETRY_SECONDS = 1.0

#: The longest the listener waits for a message before looking at its stop flag again: what
#: closing an engine may wait for it.
LISTEN_SECONDS = 0.1

#: How often a replica compares its real wall clock with Redis's `TIME` (real seconds, and on
#: every join), and how far apart the two may be before it says so: shared deadlines are
#: wall-clock times, so a clock an hour ahead half-opens a breaker an hour early.
CLOCK_CHECK_SECONDS = 60.0
CLOCK_TOLERANCE_SECONDS = 2.0


_MAX_TEXT = 500
#: Versions and generations beyond this are damage: Lua counts exactly only up to 2**53.
_MAX_COUNTER = 2**53
_MAX_NAME = 256
#: The longest a transition waits for one of the primary's replicas to have it (`WAIT`).
WAIT_MS = 100
#: The kinds a script makes that carry no fields.
_BARE: dict[str, type[Transition]] = {
    ev.HALF_OPEN: HalfOpened,
    ev.RECOVERED: Recovered,
}
_COUNTED = frozenset({OutcomeClass.AUTH_FAILURE.value, OutcomeClass.UPSTREAM_FAILURE.value})


class _Fields(BaseModel):
    """A breaker's hash as the script returns it."""

    model_config = ConfigDict(extra="ignore")

    state: State
    count: int = Field(ge=0, le=1_000_000)
    lf: float | None
    detail: str = Field(max_length=10 * _MAX_TEXT)
    opened: float | None
    cooldown: float
    fp: int = Field(ge=0, le=1_000_000)
    paged: bool
    cause: str = Field(max_length=64)
    probe: str = Field(max_length=_MAX_NAME)
    pd: float
    # The hold and the mode: absent from a verdict an older build wrote (never held, no mode).
    hby: str = Field(default="", max_length=10 * _MAX_TEXT)
    hwhy: str = Field(default="", max_length=10 * _MAX_TEXT)
    hu: float | None = None
    mode: str = Field(default="", max_length=64)
    mfor: str = Field(default="", max_length=64)


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(max_length=_MAX_NAME)
    ver: int = Field(ge=0, le=_MAX_COUNTER)
    gen: int = Field(ge=0, le=_MAX_COUNTER)
    hgen: int = Field(default=0, ge=0, le=_MAX_COUNTER)
    mgen: int = Field(default=0, ge=0, le=_MAX_COUNTER)
    origin: str = Field(max_length=_MAX_NAME)
    s: _Fields
    # An empty Lua table encodes as an object, so "no transitions" may come as {}.
    tr: list[tuple[str, dict[str, Any]]] | dict[str, Any] = Field(default_factory=list)
    admit: Literal["normal", "probe", "open", "probe_in_flight", "held"] | None = None
    left: float = 0.0
    probe: bool = False
    expired: str | None = None
    expired_tr: int = Field(default=0, ge=0, le=2)
    won: Literal["store", "replica"] | None = None
    writer: str = Field(default="", max_length=_MAX_NAME)


class SharedStore:
    """The Redis a gateway fleet shares, one connection pool, one listener thread.

    Built without I/O; `Engine(shared=…)` starts it when it restores. Every command has
    `timeout` seconds and no retry: a slow or lost Redis costs one timeout, then the store is
    `lost` and the engine decides locally until the listener finds it again.
    """

    def __init__(
        self,
        url: str,
        *,
        password: str | None = None,
        sentinel_password: str | None = None,
        prefix: str = "breakerdeck",
        timeout: float = 0.25,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`url` as `store_url` reads it (`ValueError` when it does not); `sentinel_password`
        for sentinels that have their own. `clock` is this replica's real wall clock (before
        any `--speed`), the one checked against Redis's."""
        where = parse_store_url(url)
        self.prefix = prefix
        self.channel = f"{prefix}:changes"
        self._where = where.where()
        #: On a Redis Cluster an agent's key carries its hash tag, `{<agent>}`, and changes
        #: travel by sharded pub/sub on one channel per slot (`_shard_channel`).
        self._cluster = where.kind == "cluster"
        self._client: redis.Redis | RedisCluster = _client(
            where, password, sentinel_password, timeout
        )
        #: How many replicas the primary had at the last look: a transition then waits for
        #: one of them to have it (`WAIT`), so a failover loses no verdict.
        self._replicas = 0
        self._script = self._client.register_script(SCRIPT)
        self._lost: str | None = None
        #: While a lost store is being rejoined, scripts run (the engine reconciles) though
        #: `lost` still says so: it clears only once every breaker is reconciled.
        self._joining = False
        self._losses = self._joined_at = 0
        self._notes = Problems()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._on_change: OnChange | None = None
        self._on_join: OnJoin | None = None
        self._wall: Callable[[], float] = time.time
        self._policy = AgentPolicy()
        self._clock = clock
        #: Seconds this replica's clock is ahead of Redis's (behind: negative) when beyond
        #: the tolerance at the last check, else None.
        self._offset: float | None = None

    def describe(self) -> str:
        """Where the store is, never with its password."""
        return self._where

    @property
    def lost(self) -> str | None:
        """Why the store cannot be used right now, or None while it can."""
        return self._lost

    @property
    def clock_warning(self) -> str | None:
        """What is wrong with this replica's clock, as the store's `TIME` showed at the last
        check, or None while it is within `CLOCK_TOLERANCE_SECONDS`."""
        offset = self._offset
        if offset is None:
            return None
        way = "ahead of" if offset > 0 else "behind"
        return (
            f"this replica's clock is {abs(offset):.1f} s {way} the shared store's "
            f"({self._where}): its cooldowns, probe leases and pages come "
            f"{abs(offset):.1f} s {'early' if offset > 0 else 'late'}; set its clock right (NTP)"
        )

    def problems(self) -> list[str]:
        lost, clock = self._lost, self.clock_warning
        lines = [] if lost is None else [f"shared store lost: {lost}"]
        lines += [] if clock is None else [clock]
        return lines + self._notes.lines()

    def _look(self) -> None:
        """On joining and every `CLOCK_CHECK_SECONDS`: this replica's clock against Redis's,
        how many replicas the primary has, and the script loaded (a restarted Redis or a new
        primary has none, and the first call would pay for it). Raises `redis.RedisError`."""
        self.check_clock()
        self._client.script_load(SCRIPT)
        if not self._cluster:  # WAIT would go to any node, not the key's: not asked there
            self._count_replicas()

    def _count_replicas(self) -> None:
        info = self._client.info("replication")
        self._replicas = int(info.get("connected_slaves", 0)) if info.get("role") == "master" else 0

    def check_clock(self) -> None:
        """Compare this replica's real wall clock with Redis's `TIME`, the round trip halved
        (DESIGN, "Replicas", "Clocks"). Raises `redis.RedisError`: the caller is the
        listener, or the join."""
        sent = time.monotonic()
        seconds, micros = self._client.time()
        mine = self._clock() - (time.monotonic() - sent) / 2
        offset = mine - (seconds + micros / 1_000_000)
        was = self._offset
        self._offset = offset if abs(offset) > CLOCK_TOLERANCE_SECONDS else None
        if self._offset is not None and was is None:
            log.error("%s", self.clock_warning)
        elif self._offset is None and was is not None:
            log.warning("this replica's clock agrees with the shared store's again")

    def note(self, problem: str) -> None:
        self._notes.add(problem)

    def _lose(self, error: Exception) -> None:
        reason = f"{self._where}: {printable(str(error))[:_MAX_TEXT] or type(error).__name__}"
        if self._lost is None and self._thread is not None:
            # Before the listener starts, the caller lists `problems` itself (a start-up line).
            log.error("shared store lost: %s; deciding locally until it returns", reason)
        self._lost = reason
        self._losses += 1

    # -- the fleet's clock ---------------------------------------------------------------------

    def anchor(self, proposed: float) -> float:
        """The wall time every sped-up replica counts from: the first replica's, kept in Redis.
        Unreachable or unreadable, this replica's own (and the store reports why)."""
        name = f"{self.prefix}:anchor"
        try:
            self._client.set(name, repr(proposed), nx=True)
            stored = self._client.get(name)
        except redis.RedisError as error:
            self._lose(error)
            return proposed
        try:
            value = float(_text(stored)) if isinstance(stored, bytes) else math.nan
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or abs(value - proposed) > 366 * 86_400:
            self.note(f"{name} in the shared store is not a usable time ({stored!r}); ignored")
            return proposed
        return value

    # -- scripts -------------------------------------------------------------------------------

    def run(
        self,
        op: str,
        name: str,
        now: float,
        origin: str,
        seen: tuple[int, int],
        *extra: Arg,
    ) -> Reply | None:
        """One script on one breaker; None when the store is lost (or just got lost). Where
        the primary has replicas, a script that made a transition waits (at most `WAIT_MS`)
        for one of them to have it, on the script's own connection, which is what `WAIT`
        counts: a failover right after then loses no verdict."""
        if self._lost is not None and not (self._joining and self._losses == self._joined_at):
            return None  # lost (or lost again while joining: the rest of the join is moot)
        keys, args = [self._key(name)], self._args(op, name, now, origin, seen, extra)
        warning = self.clock_warning
        try:
            if not self._replicas:
                return self.read_reply(self._script(keys=keys, args=args), now, warning=warning)
            assert isinstance(self._client, redis.Redis)  # no replicas counted on a cluster
            pool = self._client.connection_pool
            with redis.Redis(connection_pool=pool, single_connection_client=True) as pinned:
                text = self._script(keys=keys, args=args, client=pinned)
                reply = self.read_reply(text, now, warning=warning)
                if isinstance(reply, Shared) and reply.transitions:
                    pinned.wait(1, WAIT_MS)
                return reply
        except redis.ResponseError as error:
            self._refused(name, error)
            return None
        except redis.RedisError as error:
            self._lose(error)
            return None

    def _refused(self, name: str, error: Exception) -> None:
        """The store answered with an error for one key (its data, a full memory, a read-only
        replica): that key is decided locally this time; the store is not lost."""
        self.note(
            f"the shared store refused a script on {printable(name)!r}: "
            f"{printable(str(error))[:_MAX_TEXT]}"
        )

    def run_many(
        self,
        op: str,
        names: Iterable[str],
        now: float,
        origin: str,
        seen: dict[str, tuple[int, int]],
    ) -> list[Reply | None]:
        """The same argument-less script on many breakers in one pipeline (a joining replica
        reading the fleet's verdicts). Raises `redis.RedisError`: the caller is the listener."""
        listed = list(names)
        if self._cluster:  # one script at a time: a pipeline of scripts spans the nodes
            return [self._run_one(op, name, now, origin, seen.get(name, (0, 0))) for name in listed]
        pipe = self._client.pipeline(transaction=False)
        for name in listed:
            self._script(
                keys=[self._key(name)],
                args=self._args(op, name, now, origin, seen.get(name, (0, 0)), ()),
                client=pipe,
            )
        replies: list[Reply | None] = []
        for name, text in zip(listed, pipe.execute(raise_on_error=False), strict=True):
            if isinstance(text, redis.ResponseError):
                self._refused(name, text)
                replies.append(None)
            elif isinstance(text, Exception):
                raise text
            else:
                replies.append(self.read_reply(text, now))
        return replies

    def _run_one(
        self, op: str, name: str, now: float, origin: str, seen: tuple[int, int]
    ) -> Reply | None:
        try:
            text = self._script(
                keys=[self._key(name)], args=self._args(op, name, now, origin, seen, ())
            )
        except redis.ResponseError as error:
            self._refused(name, error)
            return None
        return self.read_reply(text, now)

    def names(self) -> list[str]:
        """Every breaker in the store (bounded). Raises `redis.RedisError`."""
        head = f"{self.prefix}:breaker:"
        found = []
        for key in self._client.scan_iter(match=f"{head}*", count=1000):
            name = _text(key)[len(head) :]
            if self._cluster and name.startswith("{") and name.endswith("}"):
                name = name[1:-1]
            if not name or len(name) > _MAX_NAME or printable(name) != name:
                self.note(f"a key in the shared store was not adopted: {printable(name)[:80]!r}")
                continue
            found.append(name)
            if len(found) >= MAX_SHARED_KEYS:
                self.note(
                    f"more than {MAX_SHARED_KEYS} breakers under {head}*; the rest not adopted"
                )
                break
        return found

    def _key(self, name: str) -> str:
        if self._cluster:
            return f"{self.prefix}:breaker:{{{name}}}"
        return f"{self.prefix}:breaker:{name}"

    def _shard_channel(self, slot: int) -> str:
        """The sharded channel of one slot: its hash tag hashes to that slot, so a script on
        a key of the slot may publish on it (SPUBLISH stays within the key's slot)."""
        return f"{self.prefix}:changes:{{{_slot_tags()[slot]}}}"

    def _args(
        self,
        op: str,
        name: str,
        now: float,
        origin: str,
        seen: tuple[int, int],
        extra: Iterable[Arg],
    ) -> list[Arg]:
        """The script's arguments; `seen` is the (generation, version) the replica last saw."""
        policy = self._policy
        return [
            op,
            repr(now),
            origin,
            *seen,
            GARBAGE_AFTER_MS,
            self._shard_channel(key_slot(self._key(name).encode()))
            if self._cluster
            else self.channel,
            name,
            repr(policy.window_seconds),
            repr(policy.cooldown_seconds),
            policy.auth_threshold,
            policy.upstream_threshold,
            *extra,
        ]

    def member(self, parts: Parts) -> Fleet:
        return Fleet(parts, self)

    def use_policy(self, policy: AgentPolicy) -> None:
        self._policy = policy

    def read_reply(self, text: object, now: float, *, warning: str | None = None) -> Reply | None:
        """A script's answer (or a published message), validated and read within bounds; None
        (and a note in `problems`) for anything else. A page this replica's script raised
        carries `warning` (its clock's, if any)."""
        try:
            data = json.loads(_text(text)) if isinstance(text, str | bytes) else None
            if isinstance(data, dict) and data.get("missing"):
                return Missing()
            if isinstance(data, dict) and data.get("behind"):
                return Behind()
            if isinstance(data, dict) and "foreign" in data:
                return Foreign(printable(str(data["foreign"]))[:64])
            return self._bounded(_Answer.model_validate(data), now, warning)
        except Exception as error:  # anything at all: it came from outside
            self.note(f"an unreadable answer from the shared store was ignored ({error!r:.200})")
            return None

    def _bounded(self, answer: _Answer, now: float, warning: str | None) -> Shared:
        f = answer.s
        policy = self._policy
        cause = f.cause if f.cause in _COUNTED else None
        verdict, notes = bounded(
            Verdict(
                key=answer.name,
                agent=answer.name,
                state=f.state,
                count=f.count,
                last_failure_at=f.lf,
                opened_at=f.opened,
                cooldown=f.cooldown,
                failed_probes=f.fp,
                paged=f.paged,
                rate_limited_streak=0,
                last_retry_after=None,
                trip_cause=cause,
                credential_ok_at=None,
                credential_revoked=False,
                saved_at=now,
                held_by=printable(f.hby)[: holds.MAX_ACTOR] if f.hby else None,
                held_reason=printable(f.hwhy)[: holds.MAX_REASON],
                held_until=f.hu if f.hby else None,
            ),
            now=now,
            trip_cooldown=policy.trip_cooldown(),
            longest_cooldown=policy.longest_cooldown(),
        )
        if notes:
            self.note(
                f"the shared verdict for {printable(answer.name)!r} had values out of range "
                f"({', '.join(notes)}); they were read as safe defaults"
            )
        state = State(verdict.state)
        probe_deadline = f.pd if math.isfinite(f.pd) else 0.0
        hold = None
        if verdict.held_by is not None and verdict.held_until is not None:
            until = verdict.held_until
            hold = Hold(verdict.held_by, verdict.held_reason or "", until, until)
        if state is State.HELD and hold is None:  # held by nobody until never: a hold ended
            hold = Hold("unknown", "", now, now)
        mode = (f.mode, f.mfor) if f.mode in modes.MODES and f.mfor in modes.MODES else None
        return Shared(
            name=answer.name,
            ver=answer.ver,
            gen=answer.gen,
            hold_gen=answer.hgen,
            mode_gen=answer.mgen,
            mode=mode,
            origin=printable(answer.origin)[:64],
            state=BreakerState(
                state=state,
                count=verdict.count,
                last_failure_at=verdict.last_failure_at,
                last_failure_detail=printable(f.detail)[:_MAX_TEXT],
                opened_at=None if state is State.CLOSED else verdict.opened_at,
                reopens_at=None,
                cooldown=verdict.cooldown,
                failed_probes=verdict.failed_probes,
                paged=verdict.paged,
                rate_limited_streak=0,
                last_retry_after=None,
                trip_cause=OutcomeClass(cause) if cause else None,
                hold=hold,
            ),
            probe=f.probe if state is State.HALF_OPEN else "",
            probe_deadline=min(probe_deadline, now + 4 * policy.probe_lease(MAX_DEADLINE_SECONDS)),
            transitions=_transitions(answer.name, answer.tr, warning),
            expired=answer.expired,
            expired_count=answer.expired_tr,
            admit=answer.admit,
            left=min(answer.left, verdict.cooldown) if answer.left >= 0 else 0.0,
            was_probe=answer.probe,
            won=answer.won,
            writer=printable(answer.writer)[:64],
        )

    # -- listening -----------------------------------------------------------------------------

    def start(self, on_change: OnChange, on_join: OnJoin, wall: Callable[[], float]) -> None:
        """Subscribe, join the fleet (`on_join`: the engine reads and reconciles every
        breaker), then listen on a thread. A store that cannot be reached now is `lost`: the
        thread keeps trying, and joins when it answers. `wall` is the engine's clock, which
        bounds the times in what others publish."""
        self._on_change, self._on_join, self._wall = on_change, on_join, wall
        pubsub = self._join()
        self._thread = threading.Thread(
            target=self._listen, args=(pubsub,), name="breakerdeck-shared", daemon=True
        )
        self._thread.start()

    def _join(self) -> _Listening | None:
        losses = self._joined_at = self._losses
        self._joining = True
        pubsub: _Listening | None = None
        try:
            pubsub = self._subscribe()
            self._look()
            assert self._on_join is not None
            self._on_join()
        except Exception as error:  # a Redis error, or anything the store's data provoked
            self._lose(error)
        finally:
            self._joining = False
        if self._losses != losses:  # lost again while joining
            if pubsub is not None:
                pubsub.close()
            return None
        self._lost = None
        return pubsub

    def _subscribe(self) -> _Listening:
        """The store's change notices: its channel, or on a cluster every slot's shard channel,
        each node subscribed to its own slots' in one command."""
        if isinstance(self._client, RedisCluster):
            return _Shards(self._client, self._shard_channel)
        pubsub: redis.client.PubSub = self._client.pubsub(ignore_subscribe_messages=True)
        try:
            pubsub.subscribe(self.channel)
        except Exception:
            pubsub.close()
            raise
        return pubsub

    def _listen(self, pubsub: _Listening | None) -> None:
        """Relay what others publish; every `RETRY_SECONDS` of quiet, ping (a Redis that hangs
        keeps its sockets open, and a fleet with nothing to write would never notice); every
        `RETRY_SECONDS`, follow the primary the sentinels name (`_follow`)."""
        heartbeat = primary_due = time.monotonic() + RETRY_SECONDS
        clock_due = time.monotonic() + CLOCK_CHECK_SECONDS
        while not self._stopping.is_set():
            if pubsub is None:
                if self._stopping.wait(RETRY_SECONDS):
                    return
                pubsub = self._join()
                if pubsub is not None:
                    log.warning("shared store %s is back; breakers reconciled", self._where)
                continue
            try:
                message = pubsub.get_message(timeout=LISTEN_SECONDS)
                if message is None and time.monotonic() > heartbeat:
                    self._client.ping()
                    heartbeat = time.monotonic() + RETRY_SECONDS
                if time.monotonic() > primary_due:
                    self._follow(pubsub)
                    primary_due = time.monotonic() + RETRY_SECONDS
                if time.monotonic() > clock_due:
                    self._look()
                    clock_due = time.monotonic() + CLOCK_CHECK_SECONDS
            except redis.RedisError as error:
                self._lose(error)
                message = None
            if self._lost is not None:
                pubsub.close()
                pubsub = None
                continue
            if message is not None and message.get("type") in ("message", "smessage"):
                self._deliver(message.get("data"))
        if pubsub is not None:
            pubsub.close()

    def _follow(self, pubsub: _Listening) -> None:
        """On a Sentinel store, every `RETRY_SECONDS`: is the node the listener is on still
        the one the sentinels name as primary? After a planned failover (`SENTINEL FAILOVER`),
        or a partition that leaves the old primary reachable from here, the old primary still
        answers and takes writes the new one never sees, until the sentinels demote it (ten
        seconds and more; never while they cannot reach it). Asking drops the pool's idle
        connections to it (redis-py's pool does, on a new name); the store is then lost, and
        the rejoin follows the new primary and writes back what it lacks. Sentinels that cannot
        be asked leave the node in use. While the primary has no replica, they are counted
        again. Raises `redis.RedisError`."""
        pool = getattr(self._client, "connection_pool", None)  # none on a cluster
        if not isinstance(pool, SentinelConnectionPool) or not isinstance(pubsub, PubSub):
            return
        on = pubsub.connection
        try:
            named = pool.get_master_address()  # type: ignore[no-untyped-call]
        except redis.RedisError:
            return
        if on is not None and (on.host, on.port) != tuple(named):
            raise redis.ConnectionError(
                f"the sentinels name {named[0]}:{named[1]} as the primary now"
            )
        if not self._replicas:
            # A failover's new primary has none until the old one comes back: counted once a
            # minute only, the transitions of that minute would not wait for it.
            self._count_replicas()

    def _deliver(self, data: object) -> None:
        """One published change to the engine. Whatever goes wrong with it is noted and the
        listener goes on: a thread that died here would leave the replica deaf for good."""
        try:
            reply = self.read_reply(data, self._wall())
            if isinstance(reply, Shared) and self._on_change is not None:
                self._on_change(reply)
        except Exception as error:
            log.exception("a change from the shared store could not be applied")
            self.note(f"a change from the shared store could not be applied ({error!r:.200})")

    def close(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(5)
        self._client.close()


def _client(
    url: StoreUrl, password: str | None, sentinel_password: str | None, timeout: float
) -> redis.Redis | RedisCluster:
    """A client for the store: one node, a cluster, or the primary that Sentinel names now (each new
    connection asks the sentinels again, so after a failover the next connection is the new
    primary's). Every command has `timeout` and no retry: the store is then lost, and the
    listener finds it again."""
    options: dict[str, Any] = {
        "password": password,
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "retry": Retry(NoBackoff(), 0),
        # Bytes: whatever another writer left in Redis (not UTF-8, say) is decoded here,
        # with replacement, never inside the client where it would raise.
        "decode_responses": False,
        "health_check_interval": 0,
    }
    if url.kind == "cluster":
        # Moved slots and a node's failover are the cluster client's to follow (a few
        # retries, re-reading the slot map); a server that is no cluster stops the start.
        options["retry"] = Retry(NoBackoff(), 3)
        try:
            return RedisCluster(
                startup_nodes=[
                    ClusterNode(host, port)  # type: ignore[no-untyped-call]
                    for host, port in url.nodes
                ],
                ssl=url.tls,
                **options,
            )
        except (redis.RedisError, RedisClusterException) as error:
            raise ValueError(f"{url.where()}: {printable(str(error))[:_MAX_TEXT]}") from None
    if url.kind == "sentinel":
        sentinels = Sentinel(
            list(url.nodes),
            sentinel_kwargs={
                "password": sentinel_password,
                "socket_timeout": timeout,
                "socket_connect_timeout": timeout,
                "ssl": url.tls,
                # A sentinel down with its host is passed over at once, as a node is: the
                # client's own retries, seconds apart, held every new connection that long.
                "retry": options["retry"],
            },
            db=url.db,
            ssl=url.tls,
            **options,
        )
        _check_sentinels(sentinels, url)
        client: redis.Redis = sentinels.master_for(url.service)
        return client
    return redis.Redis.from_url(url.redis_url(), **options)


class _Shards:
    """Sharded pub/sub on a cluster: one subscriber per primary, on the shard channels of the
    slots it holds, their SSUBSCRIBEs sent in one write (the cluster client's own subscriber
    sends them one by one: six seconds for 16,384). A slot that moves away unsubscribes its channel,
    and Redis says so: the store is then taken as lost, and the listener's next join reads the
    slot map again and reconciles, so a moved slot costs a rejoin, never a lost change."""

    def __init__(self, cluster: RedisCluster, channel: Callable[[int], str]) -> None:
        # The slot map read again first: after a primary's failover the client's map names the
        # dead primary until a command through the client fails, and a rejoin subscribes before
        # it sends any, so it tried the dead node every second, for good.
        cluster.nodes_manager.initialize()
        owned: dict[str, tuple[redis.Redis, list[str]]] = {}
        for slot in range(REDIS_CLUSTER_HASH_SLOTS):
            node = cluster.nodes_manager.get_node_from_slot(slot)
            client = node.redis_connection
            assert client is not None
            owned.setdefault(node.name, (client, []))[1].append(channel(slot))
        self._subscribers: list[redis.client.PubSub] = []
        try:
            for client, channels in owned.values():
                subscriber = client.pubsub()
                self._subscribers.append(subscriber)
                # SSUBSCRIBE takes the channels of one slot: the first through the client
                # (which opens the connection and marks it subscribed), the rest sent at once.
                subscriber.ssubscribe(channels[0])
                connection = subscriber.connection
                assert connection is not None
                connection.send_packed_command(
                    connection.pack_commands([("SSUBSCRIBE", name) for name in channels[1:]])
                )
        except Exception:
            self.close()
            raise

    def get_message(self, timeout: float) -> dict[str, Any] | None:
        """The next change from any node, within about `timeout`."""
        each = timeout / max(1, len(self._subscribers))
        for subscriber in self._subscribers:
            message = subscriber.get_message(timeout=each)
            while message is not None:  # past the confirmations of the subscription
                kind = message.get("type")
                if kind == "sunsubscribe":
                    raise redis.ConnectionError("a slot of the cluster moved; joining again")
                if kind == "smessage":
                    change: dict[str, Any] = message
                    return change
                message = subscriber.get_message(timeout=0.0)
        return None

    def close(self) -> None:
        for subscriber in self._subscribers:
            subscriber.close()


_Listening = redis.client.PubSub | _Shards


@cache
def _slot_tags() -> list[str]:
    """For each of the cluster's slots, a short text that hashes to it (computed once)."""
    tags: dict[int, str] = {}
    number = 0
    while len(tags) < REDIS_CLUSTER_HASH_SLOTS:
        tags.setdefault(key_slot(str(number).encode()), str(number))
        number += 1
    return [tags[slot] for slot in range(REDIS_CLUSTER_HASH_SLOTS)]


def _check_sentinels(sentinels: Sentinel, url: StoreUrl) -> None:
    """A Sentinel URL is checked when the store is made (at start): no sentinel answering, or
    none knowing the service, is a mistake in the URL far more often than an outage, and a
    fleet started on it would never share a verdict."""
    why = ""
    for sentinel in sentinels.sentinels:
        try:
            sentinel.ping()
            break
        except redis.RedisError as error:
            why = printable(str(error))[:_MAX_TEXT] or type(error).__name__
    else:
        raise ValueError(f"{url.where()}: no sentinel answers ({why})")
    try:
        sentinels.discover_master(url.service)
    except redis.RedisError:
        raise ValueError(
            f"{url.where()}: no sentinel knows a primary named {url.service!r}"
        ) from None


def _transitions(
    key: str, raw: list[tuple[str, dict[str, Any]]] | dict[str, Any], warning: str | None
) -> tuple[Transition, ...]:
    """The transitions a script made, with only the fields the design gives each kind."""
    if isinstance(raw, dict):
        return ()
    made: list[Transition] = []
    for kind, fields in raw:
        if kind == ev.TRIPPED:
            cls = fields.get("failure_class")
            made.append(
                Tripped(
                    key,
                    OutcomeClass(cls) if cls in _COUNTED else OutcomeClass.UPSTREAM_FAILURE,
                    int(_number(fields.get("count"), int)),
                    float(_number(fields.get("cooldown_seconds"), float)),
                )
            )
        elif kind == ev.REOPENED:
            made.append(Reopened(key, float(_number(fields.get("cooldown_seconds"), float))))
        elif kind == ev.RESET:
            made.append(Reset(key, _words(fields, "actor"), _words(fields, "reason")))
        elif kind == ev.PAGE:
            made.append(Paged(key, warning=warning))
        elif kind == ev.HELD:
            until = fields.get("until")
            if not (isinstance(until, int | float) and math.isfinite(until) and until > 0):
                until = 0.0
            made.append(Held(key, _words(fields, "actor"), _words(fields, "reason"), until))
        elif kind == ev.RELEASED:
            made.append(Released(key, _words(fields, "actor")))
        elif kind == ev.MODE:
            was, to = fields.get("from"), fields.get("to")
            if was in modes.MODES and to in modes.MODES:
                actor, reason = _words(fields, "actor"), _words(fields, "reason")
                made.append(ModeChanged(key, actor, reason, str(was), str(to)))
        elif kind in _BARE:
            made.append(_BARE[kind](key))
    return tuple(made)


def _words(fields: dict[str, Any], name: str) -> str:
    """An operator's actor or reason as a script made it: printable, within the bounds."""
    most = holds.MAX_ACTOR if name == "actor" else holds.MAX_REASON
    return printable(str(fields.get(name, "")))[:most]


def _text(value: object) -> str:
    """What Redis sent, as text: bytes that are not UTF-8 replaced, never raised on."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _number(value: object, kind: type[int] | type[float]) -> int | float:
    if isinstance(value, int | float) and math.isfinite(value) and 0 <= value <= 86_400 * 366:
        return kind(value)
    return kind(0)
