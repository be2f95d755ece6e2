"""Replicas on one Redis (issue 13, "Speed"): each target printed beside its figure.

Printed, never asserted. One `redis-server` (tests/redis_server.py: Debian's binary on a free
loopback port, nothing on disk) serves every part, one part at a time, so the server's own
counters see only the part being measured:

1. Closed path: `new_call` → `admit` → `complete` of a healthy call on an `Engine` (agent
   policy, system clock) with a `SharedStore` against the same engine without one, sync and
   async (`admit_async`/`complete_async`), with no listener and with one; in each of 15
   repeats the two loops run back to back, each first in turn, and the ratio is the median of
   the repeats' on ÷ off. The same through a gateway: wrk against one without `--shared` and
   one with it (part 4).
2. Propagation: replica A (this process) and replica B (a child process), both `Engine`s on the
   Redis. Each round A counts five upstream failures; B's listener sees the relayed
   `circuit_breaker.tripped` and admits at once, which must refuse. The time is from just
   before A's fifth `complete` to just after B's refusal, both read on CLOCK_MONOTONIC (one
   clock for every process on Linux). A reset between rounds; B confirms it admits again.
3. Round trips, counted at the server: `INFO commandstats` before and after, the script calls
   (`evalsha`, `evalsha_ro`, `eval`, `eval_ro`) and any other command a client sent (all but
   `info`, the listener's keep-alive PING, and the commands the script itself runs: HGETALL,
   HSET, PEXPIRE, PUBLISH), over one engine on a manual clock: healthy calls, counted
   failures, refusals in the cooldown, a probe that fails and one that recovers.
4. Gateways (`breakerdeck gateway`, bench/gateway.py's static upstream and wrk script): wrk at
   64 connections against one gateway without `--shared` and one with it, then against two
   `--shared` replicas with 32 connections each at once, summed; medians of 3 rounds. And the
   first 403 from replica B after replica A counted an agent's fifth upstream failure: a
   thread polls B for that agent through a platform answering 404 (neither counted nor a
   success, so the polls leave A's count alone), from just before A's fifth request.

Run alone: `.venv/bin/python bench/shared.py`. Needs `redis-server` and `wrk` (apt).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import os
import platform
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import timeit
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import measure
from bench.common import make_sink, table_header, table_row, yes
from bench.gateway import (
    DURATION,
    PYTHON,
    REPORT_LUA,
    TOKEN,
    UPSTREAM,
    Load,
    _free_port,
    _process,
    wrk,
)
from breakerdeck.engine import events as ev
from breakerdeck.engine.clock import ManualClock, SystemClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.events import Event
from breakerdeck.engine.outcomes import SUCCESS, Outcome, OutcomeClass
from breakerdeck.engine.policy import AgentPolicy
from breakerdeck.engine.shared import SharedStore
from tests.redis_server import RedisServer, RedisServerMissing

AGENT = "agent-7"
LEASE = 30.0
DOWN = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="backend down")
TRIPS = int(os.environ.get("SHARED_BENCH_TRIPS", "300"))
COUNT_ROUNDS = 50
CLOSED_REPEATS = 15
US = 1e6
WRK_REPEATS = int(os.environ.get("SHARED_BENCH_WRK_REPEATS", "3"))
CONNECTIONS = 64
REPLY_SECONDS = 5.0
TARGET_CLOSED = 1.1
TARGET_P99_MS = 50.0
#: What shared.lua runs inside its script: not round trips.
SCRIPT_COMMANDS = frozenset({"hgetall", "hset", "pexpire", "publish"})
SCRIPT_CALLS = frozenset({"evalsha", "evalsha_ro", "eval", "eval_ro"})
#: The store's listener pings Redis after each second of quiet (noticing a Redis that hangs):
#: counted apart, as no operation sends it.
KEEPALIVE = "ping"


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _store(url: str) -> SharedStore:
    return SharedStore(url, prefix="bench")


def _failures(engine: Engine, key: str, n: int) -> None:
    for _ in range(n):
        call = engine.new_call(key, key, "up", "GET", LEASE)
        engine.admit(call, LEASE)
        engine.complete(call, DOWN, "upstream", 502)


# -- 1. the closed path ------------------------------------------------------------------------


def _guard(engine: Engine) -> Callable[[], None]:
    new_call, admit, complete = engine.new_call, engine.admit, engine.complete

    def guarded() -> None:
        call = new_call(AGENT, AGENT, "up", "GET", LEASE)
        if admit(call, LEASE).allowed:
            complete(call, SUCCESS, "ok", 200)

    return guarded


def _guard_async(engine: Engine) -> Callable[[], Awaitable[None]]:
    new_call, admit, complete = engine.new_call, engine.admit_async, engine.complete_async

    async def guarded() -> None:
        call = new_call(AGENT, AGENT, "up", "GET", LEASE)
        if (await admit(call, LEASE)).allowed:
            await complete(call, SUCCESS, "ok", 200)

    return guarded


Loop = Callable[[int], float]  # seconds per call over that many calls


def _sync_loop(fn: Callable[[], Any]) -> Loop:
    timer = timeit.Timer(fn)
    return lambda number: timer.timeit(number) / number


def _async_loop(loop: asyncio.AbstractEventLoop, afn: Callable[[], Awaitable[None]]) -> Loop:
    async def calls(number: int) -> float:
        start = time.perf_counter()
        for _ in range(number):
            await afn()
        return (time.perf_counter() - start) / number

    return lambda number: loop.run_until_complete(calls(number))


@dataclass
class Closed:
    """Off and on, µs per call (medians), and the median of the repeats' on ÷ off."""

    title: str
    off_us: float
    on_us: float
    ratio: float


def _paired(title: str, off: Loop, on: Loop) -> Closed:
    """Both loops in every repeat, back to back and in turn first, so that load from other
    processes (and whichever runs first) hits them alike; the garbage collector off."""
    number = max(1000, int(measure.TARGET_SECONDS / off(1000)))
    offs, ons = [], []
    enabled = gc.isenabled()
    gc.disable()
    try:
        for n in range(CLOSED_REPEATS):
            if n % 2:
                ons.append(on(number))
                offs.append(off(number))
            else:
                offs.append(off(number))
                ons.append(on(number))
    finally:
        if enabled:
            gc.enable()
    ratio = statistics.median(b / a for a, b in zip(offs, ons, strict=True))
    return Closed(title, statistics.median(offs) * US, statistics.median(ons) * US, ratio)


def closed_path(url: str) -> list[Closed]:
    loop = asyncio.new_event_loop()
    rows = []
    for listener in (False, True):
        off = Engine(AgentPolicy(), clock=SystemClock())
        on = Engine(AgentPolicy(), clock=SystemClock(), shared=_store(url), instance="closed")
        for engine in (off, on):
            if listener:
                engine.subscribe(make_sink().append)
            engine.restore()
        with_what = "one listener" if listener else "no listener"
        with off, on:
            rows.append(
                _paired(f"sync, {with_what}", _sync_loop(_guard(off)), _sync_loop(_guard(on)))
            )
            rows.append(
                _paired(
                    f"async, {with_what}",
                    _async_loop(loop, _guard_async(off)),
                    _async_loop(loop, _guard_async(on)),
                )
            )
    loop.close()
    return rows


# -- 2. propagation, engine to engine ----------------------------------------------------------


@contextlib.contextmanager
def _replica(url: str) -> Iterator[queue.Queue[str]]:
    """Replica B in a child process (this file, `--replica URL`): the lines it prints."""
    child = subprocess.Popen(
        [PYTHON, __file__, "--replica", url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdin is not None
    lines: queue.Queue[str] = queue.Queue()

    def read(stream: IO[str]) -> None:
        for line in stream:
            lines.put(line.strip())

    reader = threading.Thread(target=read, args=(child.stdout,))
    reader.start()
    try:
        if lines.get(timeout=30) != "ready":
            raise RuntimeError("replica B did not start")
        yield lines
    finally:
        child.stdin.close()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        reader.join(5)


def replica(url: str) -> None:
    """Replica B: on each relayed trip or reset of AGENT, an admit at once; prints
    `<type> <seen> <admitted> <allowed>` (CLOCK_MONOTONIC) until its standard input closes."""
    engine = Engine(AgentPolicy(), clock=SystemClock(), shared=_store(url), instance="replica-b")
    said: queue.Queue[str | None] = queue.Queue()

    def listener(event: Event) -> None:
        if not event.relayed or event.key != AGENT or event.type not in (ev.TRIPPED, ev.RESET):
            return
        seen = time.monotonic()
        call = engine.new_call(AGENT, AGENT, "up", "GET", LEASE)
        admission = engine.admit(call, LEASE)
        admitted = time.monotonic()
        if admission.allowed:
            engine.complete(call, SUCCESS, "ok", 200)
        said.put(f"{event.type} {seen!r} {admitted!r} {int(admission.allowed)}")

    def speak() -> None:
        while (line := said.get()) is not None:
            print(line, flush=True)

    engine.subscribe(listener)
    engine.restore()
    speaker = threading.Thread(target=speak)
    speaker.start()
    print("ready", flush=True)
    sys.stdin.read()
    engine.close()
    said.put(None)
    speaker.join()


@dataclass
class Propagation:
    seen_ms: list[float] = field(default_factory=list)
    refused_ms: list[float] = field(default_factory=list)
    not_refused: int = 0
    not_reopened: int = 0


def propagation(url: str, trips: int = TRIPS) -> Propagation:
    found = Propagation()
    engine = Engine(AgentPolicy(), clock=SystemClock(), shared=_store(url), instance="replica-a")
    engine.restore()
    with engine, _replica(url) as lines:
        for n in range(trips + 5):  # the first five warm both replicas up, not counted
            _failures(engine, AGENT, 4)
            start = time.monotonic()
            _failures(engine, AGENT, 1)
            kind, seen, admitted, allowed = lines.get(timeout=REPLY_SECONDS).split()
            assert kind == ev.TRIPPED, kind
            if n >= 5:
                found.seen_ms.append((float(seen) - start) * 1e3)
                found.refused_ms.append((float(admitted) - start) * 1e3)
                found.not_refused += allowed == "1"
            engine.reset(AGENT, "bench", "next round")
            kind, _, _, allowed = lines.get(timeout=REPLY_SECONDS).split()
            assert kind == ev.RESET, kind
            found.not_reopened += allowed == "0"
    return found


# -- 3. round trips, counted at the server -----------------------------------------------------


@dataclass
class Trips:
    """Commands the server received for one kind of operation, over how many of them."""

    operations: int = 0
    scripts: int = 0
    others: int = 0
    other_names: set[str] = field(default_factory=set)
    pings: int = 0


class CommandStats:
    """`INFO commandstats` before and after each counted step."""

    def __init__(self, server: RedisServer) -> None:
        self._client = server.client()
        self.kinds: dict[str, Trips] = {}

    def _calls(self) -> dict[str, int]:
        stats = self._client.info("commandstats")
        return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}

    @contextlib.contextmanager
    def count(self, kind: str, operations: int) -> Iterator[None]:
        before = self._calls()
        yield
        after = self._calls()
        trips = self.kinds.setdefault(kind, Trips())
        trips.operations += operations
        for name, calls in after.items():
            moved = calls - before.get(name, 0)
            if not moved or name == "info" or name in SCRIPT_COMMANDS:
                continue
            if name == KEEPALIVE:
                trips.pings += moved
            elif name in SCRIPT_CALLS:
                trips.scripts += moved
            else:
                trips.others += moved
                trips.other_names.add(name)

    def close(self) -> None:
        self._client.close()


def _probe(engine: Engine, key: str, outcome: Outcome) -> None:
    """One probe: its admit (the store's half-open and probe slot) and its outcome."""
    call = engine.new_call(key, key, "up", "GET", LEASE)
    if not engine.admit(call, LEASE).as_probe:
        raise RuntimeError(f"{key}: the cooldown ended but no probe was let in")
    engine.complete(call, outcome, "ok" if outcome is SUCCESS else "upstream", 200)


def round_trips(server: RedisServer) -> dict[str, Trips]:
    clock = ManualClock()
    policy = AgentPolicy()
    engine = Engine(policy, clock=clock, shared=_store(server.url), instance="counting")
    engine.restore()
    counter = CommandStats(server)
    with engine:
        _failures(engine, "warm-up", 1)  # the script's first call loads it (NOSCRIPT, LOAD)
        for n in range(COUNT_ROUNDS):
            key = f"agent-{n:03d}"
            with counter.count("healthy call, closed", 10):
                for _ in range(10):
                    _guard(engine)()  # key AGENT, never failing
            with counter.count("counted failure, no trip", 4):
                _failures(engine, key, 4)
            with counter.count("counted failure that trips", 1):
                _failures(engine, key, 1)
            with counter.count("refusal in the cooldown", 10):
                for _ in range(10):
                    call = engine.new_call(key, key, "up", "GET", LEASE)
                    assert not engine.admit(call, LEASE).allowed
            clock.advance(policy.cooldown_seconds + 1)
            with counter.count("probe that fails", 1):
                _probe(engine, key, DOWN)
            clock.advance(policy.cooldown_seconds + 1)
            with counter.count("probe that recovers", 1):
                _probe(engine, key, SUCCESS)
    counter.close()
    return counter.kinds


# -- 4. gateways under wrk, and propagation gateway to gateway ---------------------------------


def _token(n: int) -> str:
    return f"bench-trip-{n:04d}"


#: bench/gateway.py's upstream answering 404: relayed, neither counted nor a success, so polling
#: replica B through it leaves the agent's count (kept by A's failures) alone.
MISSING = UPSTREAM.replace("200 OK", "404 Not Found")
PLATFORMS = ("up", "dead", "missing")


def _config(directory: Path, upstream: int, missing: int, agents: int) -> Path:
    """bench/gateway.py's platforms and agent, a platform answering 404, and `agents` more
    agents, one per propagation round."""
    credential = directory / "credential"
    credential.write_text("platform-credential\n")
    credential.chmod(0o600)
    lines = [
        f'[platforms.up]\nbase_url = "http://127.0.0.1:{upstream}"',
        '[platforms.dead]\nbase_url = "http://127.0.0.1:1"',
        f'[platforms.missing]\nbase_url = "http://127.0.0.1:{missing}"',
    ]
    named = [("bench", TOKEN)] + [(f"trip-{n:04d}", _token(n)) for n in range(agents)]
    for agent, token in named:
        digest = hashlib.sha256(token.encode()).hexdigest()
        lines.append(
            f'[agents.{agent}]\ntoken_sha256 = "{digest}"\n[agents.{agent}.credentials]\n'
            + "".join(f'{name} = {{ file = "{credential}" }}\n' for name in PLATFORMS)
        )
    path = directory / "gateway.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _gateway(config: Path, port: int, shared: str | None) -> list[str]:
    argv = [PYTHON, "-m", "breakerdeck.console.cli", "gateway", "--config", str(config)]
    argv += ["--listen", f"127.0.0.1:{port}"]
    return argv + ([] if shared is None else ["--shared", shared])


@dataclass
class Gateways:
    alone: list[Load] = field(default_factory=list)
    shared: list[Load] = field(default_factory=list)
    pair: list[tuple[Load, Load]] = field(default_factory=list)
    first_403_ms: list[float] = field(default_factory=list)
    fifth_ms: list[float] = field(default_factory=list)
    missed: int = 0


def _first_403(b: str, n: int, polling: threading.Event, found: list[float]) -> None:
    """Replica B, polled for agent n until it answers 403: when that answer arrived."""
    headers = {"Authorization": f"Bearer {_token(n)}"}
    with httpx.Client(base_url=b, headers=headers, timeout=REPLY_SECONDS) as client:
        deadline = time.monotonic() + REPLY_SECONDS
        while time.monotonic() < deadline:
            status = client.get("/p/missing/x").status_code
            polling.set()
            if status == 403:
                found.append(time.monotonic())
                return


def _gateway_propagation(a: str, b: str, trips: int, figures: Gateways) -> None:
    """Each agent once: four failures on A, B polled, then A's fifth failure; the time from
    just before it to B's first 403."""
    for n in range(trips + 5):  # the first five warm up, not counted
        headers = {"Authorization": f"Bearer {_token(n)}"}
        with httpx.Client(base_url=a, headers=headers, timeout=REPLY_SECONDS) as client:
            for _ in range(4):
                client.get("/p/dead/x")
            polling, found = threading.Event(), list[float]()
            poller = threading.Thread(target=_first_403, args=(b, n, polling, found))
            poller.start()
            polling.wait(REPLY_SECONDS)
            start = time.monotonic()
            client.get("/p/dead/x")
            answered = time.monotonic()
            poller.join()
        if n < 5:
            continue
        figures.fifth_ms.append((answered - start) * 1e3)
        if found:
            figures.first_403_ms.append((found[0] - start) * 1e3)
        else:
            figures.missed += 1


def gateways(url: str, trips: int = TRIPS) -> Gateways:
    figures = Gateways()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        script = directory / "report.lua"
        script.write_text(REPORT_LUA)
        up, missing = _free_port(), _free_port()
        config = _config(directory, up, missing, trips + 5)
        ports = [_free_port() for _ in range(3)]
        with contextlib.ExitStack() as running:
            for name, source, port in (("upstream", UPSTREAM, up), ("missing", MISSING, missing)):
                (directory / f"{name}.py").write_text(source)
                running.enter_context(
                    _process([PYTHON, str(directory / f"{name}.py"), str(port)], port)
                )
            for port, shared in zip(ports, (None, url, url), strict=True):
                running.enter_context(_process(_gateway(config, port, shared), port))
            alone, a, b = (f"http://127.0.0.1:{port}" for port in ports)
            _progress("gateway propagation, A to B over HTTP ...")
            _gateway_propagation(a, b, trips, figures)
            with ThreadPoolExecutor(2) as pool:
                for n in range(WRK_REPEATS):
                    _progress(f"gateways under wrk, round {n + 1} of {WRK_REPEATS} ...")
                    figures.alone.append(wrk(f"{alone}/p/up/x", script))
                    figures.shared.append(wrk(f"{a}/p/up/x", script))
                    half = CONNECTIONS // 2
                    both = [
                        pool.submit(wrk, f"{g}/p/up/x", script, connections=half) for g in (a, b)
                    ]
                    figures.pair.append((both[0].result(), both[1].result()))
    return figures


# -- the table ---------------------------------------------------------------------------------


@dataclass
class Figures:
    redis_version: str
    closed: list[Closed]
    propagation: Propagation
    trips: dict[str, Trips]
    gateways: Gateways
    seconds: float


def run() -> Figures:
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-shared-") as tmp:
        server = RedisServer(Path(tmp)).start()
        try:
            with server.client() as client:
                version = str(client.info("server")["redis_version"])
            _progress("round trips per operation, counted at the server ...")
            trips = round_trips(server)
            _progress("closed path, shared store on against off ...")
            closed = closed_path(server.url)
            _progress(f"propagation, engine to engine, {TRIPS} trips ...")
            spread = propagation(server.url)
            found = gateways(server.url)
        finally:
            server.kill()
    return Figures(version, closed, spread, trips, found, time.perf_counter() - start)


def _percentile(values: list[float], p: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


def _ms(values: list[float], p: int) -> str:
    return "n/a" if len(values) < 2 else f"{_percentile(values, p):.2f}"


def _p99_met(values: list[float], misses: int) -> str:
    return yes(len(values) >= 2 and not misses and _percentile(values, 99) <= TARGET_P99_MS)


def render(f: Figures) -> str:
    cores = os.cpu_count()
    lines = [
        f"breakerdeck replicas on one Redis · CPython {platform.python_version()} · "
        f"{platform.machine()} · {cores} cores · loopback · redis-server {f.redis_version}",
        *table_header(),
        "closed path, a healthy call, shared store on (value) and off (µs per call, medians",
        f"of {CLOSED_REPEATS} repeats running both back to back; ratio: median of on ÷ off)",
    ]
    for row in f.closed:
        lines.append(
            table_row(
                f"Engine, {row.title} (off {row.off_us:.2f})",
                f"{row.on_us:.2f}",
                f"{row.ratio:.2f}x",
                f"≤ {TARGET_CLOSED:.2f}x",
                yes(row.ratio <= TARGET_CLOSED),
            )
        )
    g = f.gateways
    alone = statistics.median(load.rps for load in g.alone)
    shared = statistics.median(load.rps for load in g.shared)
    cost = statistics.median(a.rps / s.rps for a, s in zip(g.alone, g.shared, strict=True))
    lines.append(
        table_row(
            f"gateway, req/s at {CONNECTIONS} conns (off {alone:,.0f})",
            f"{shared:,.0f}",
            f"{cost:.2f}x",
            f"≤ {TARGET_CLOSED:.2f}x",
            yes(cost <= TARGET_CLOSED),
        )
    )
    lines.append(
        f"  (gateway: wrk -t1, {DURATION} s, median of {WRK_REPEATS}; ratio: off ÷ on req/s, "
        "the time per request on ÷ off)"
    )
    p = f.propagation
    lines += [
        "",
        "propagation: just before A's fifth counted failure → B refuses (ms)",
        table_row(f"engine → engine, p50 ({len(p.refused_ms)} trips)", _ms(p.refused_ms, 50)),
        table_row(
            "engine → engine, p99",
            _ms(p.refused_ms, 99),
            "-",
            f"≤ {TARGET_P99_MS:.0f}",
            _p99_met(p.refused_ms, p.not_refused + p.not_reopened),
        ),
        table_row("  B's listener saw the trip, p99", _ms(p.seen_ms, 99)),
        table_row("  max", f"{max(p.refused_ms, default=0):.2f}"),
        table_row(
            "  B's wrong answers (after trip / reset)",
            f"{p.not_refused}/{p.not_reopened}",
            "-",
            "0/0",
            yes(not p.not_refused and not p.not_reopened),
        ),
        table_row(
            f"gateway → gateway, first 403, p50 ({len(g.first_403_ms)})", _ms(g.first_403_ms, 50)
        ),
        table_row(
            "gateway → gateway, first 403, p99",
            _ms(g.first_403_ms, 99),
            "-",
            f"≤ {TARGET_P99_MS:.0f}",
            _p99_met(g.first_403_ms, g.missed),
        ),
        table_row("  max", f"{max(g.first_403_ms, default=0):.2f}"),
        table_row("  A answered its fifth failure, p50", _ms(g.fifth_ms, 50)),
        table_row(
            "  rounds with no 403 from B within 5 s", str(g.missed), "-", "0", yes(not g.missed)
        ),
        "",
        "Redis round trips per operation (INFO commandstats at the server: script calls and",
        "any other command a client sent; a probe is its admit and its outcome)",
    ]
    targets: dict[str, tuple[str, Callable[[float], bool]]] = {
        "counted failure, no trip": ("= 1", lambda v: v == 1),
        "counted failure that trips": ("= 1", lambda v: v == 1),
        "probe that recovers": ("≤ 2", lambda v: v <= 2),
        "probe that fails": ("≤ 2", lambda v: v <= 2),
        "healthy call, closed": ("= 0", lambda v: v == 0),
        "refusal in the cooldown": ("= 0", lambda v: v == 0),
    }
    for kind, (target, met) in targets.items():
        t = f.trips[kind]
        value = (t.scripts + t.others) / t.operations
        label = f"{kind} ({t.operations})"
        lines.append(table_row(label, f"{value:.2f}", "-", target, yes(met(value))))
        if t.others:
            lines.append(
                f"    of which not scripts: {t.others} ({', '.join(sorted(t.other_names))})"
            )
    pings = sum(t.pings for t in f.trips.values())
    lines.append(f"  the listener's keep-alive PINGs inside those windows, not counted: {pings}")
    pair = [a.rps + b.rps for a, b in g.pair]
    two = statistics.median(pair)
    lines += [
        "",
        "two gateway replicas on one Redis against one (relayed req/s; ratio: of one --shared)",
        table_row(
            f"one gateway, no --shared, {CONNECTIONS} conns",
            f"{alone:,.0f}",
            f"{alone / shared:.2f}x",
        ),
        table_row(f"one gateway, --shared, {CONNECTIONS} conns", f"{shared:,.0f}", "1.00x"),
        table_row(
            f"two --shared, {CONNECTIONS // 2} + {CONNECTIONS // 2} conns at once",
            f"{two:,.0f}",
            f"{statistics.median(x / s.rps for x, s in zip(pair, g.shared, strict=True)):.2f}x",
        ),
        f"  on {cores} cores shared by wrk (two at once for the pair), the gateways, the upstream "
        "and redis-server",
        "",
        f"shared section took {f.seconds:.1f} s",
    ]
    return "\n".join(lines)


def section() -> str:
    """The table, or why it could not be made (no redis-server: the package to install)."""
    try:
        return render(run())
    except RedisServerMissing as missing:
        return f"replicas on one Redis: not measured: {missing}"


def main() -> None:
    print(section(), flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--replica"]:
        replica(sys.argv[2])
    else:
        main()
