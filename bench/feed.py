"""The live feed under load: delivery and lag to 20 watchers, and what serving costs the calls.

Run from the repository root: `.venv/bin/python bench/feed.py` (or as part of bench/run.py).
Printed, never asserted. Everything is on loopback, bounded in time, and stops by itself.

1. Stream: an engine (tool policy, system clock, 50 keys) served by `serve_feed` on an event
   loop in a background thread, as `breakerdeck serve` runs it; 20 watchers in a separate
   process (bench/feed_watcher.py) read every frame and check its envelope. The event source
   is this process's main thread driving the engine's own call path (`enter`, `admit`,
   `complete` with a success: one `call.completed` line each) at a target rate, in bursts
   every millisecond. Each event's emit time is the engine's own stamp (`Event.wall`,
   `time.time()`), kept by seq; a watcher notes `time.time()` when a frame arrives. Lag is
   arrival minus emit, per event and per watcher.
2. Call path: the same three calls, paced at 1,000 calls/s in bursts of 10, each burst timed;
   calls/s is calls over the time spent in them. With the feed attached every call is an
   event, so the watchers receive 1,000 events/s. Against the same engine with no feed (and
   so no listener: a healthy call then writes no line at all).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import table_header, table_row, yes
from breakerdeck.engine.clock import SystemClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.feed.server import FeedServer, serve_feed
from breakerdeck.engine.outcomes import SUCCESS
from breakerdeck.engine.policy import ToolPolicy

WATCHERS = 20
RATES = (1_000, 5_000, 10_000)
STREAM_SECONDS = 3.0
KEYS = 50
CALL_RATE = 1_000
CALL_BURST = 10
CALL_SECONDS = 2.5
CALL_WARMUP = 0.3
TARGET_RATE = 10_000
TARGET_P99_MS = 100.0
TARGET_SLOWDOWN = 0.10
READY_TIMEOUT = 30.0
VIEWER = "bench-viewer-token"
OPERATOR = "bench-operator-token"
WATCHER_SCRIPT = Path(__file__).resolve().parent / "feed_watcher.py"
ROOT = Path(__file__).resolve().parent.parent


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def make_engine(keys: int) -> tuple[Engine, list[str]]:
    engine = Engine(ToolPolicy(), clock=SystemClock())
    names = [f"backend-{i:02d}@default" for i in range(keys)]
    for name in names:  # the snapshot has every breaker from the start
        engine.enter(key=name, agent="agent-1", platform=name, tool="t", deadline_seconds=30)
    return engine, names


def one_call(engine: Engine, key: str) -> Any:
    call = engine.enter(
        key=key, agent="agent-1", platform="search-api", tool="search", deadline_seconds=30.0
    )
    engine.admit(call, 30.0)
    call.attempts = 1
    return engine.complete(call, SUCCESS, fault="ok", agent_status="ok")


# -- the feed on its own loop thread, and the watcher process ------------------------------------


class ServedEngine:
    """`serve_feed(engine)` on an event loop in a daemon thread, on a free loopback port."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.feed: FeedServer | None = None
        self._started = threading.Event()
        self._stop: asyncio.Event | None = None

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with serve_feed(
            self.engine,
            host="127.0.0.1",
            port=0,
            viewer_token=VIEWER,
            operator_token=OPERATOR,
            source_name="bench",
        ) as feed:
            self.feed = feed
            self._started.set()
            await self._stop.wait()

    def __enter__(self) -> ServedEngine:
        self.thread.start()
        self.future = asyncio.run_coroutine_threadsafe(self._serve(), self.loop)
        if not self._started.wait(10):
            raise RuntimeError("the feed did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stop is not None
        self.loop.call_soon_threadsafe(self._stop.set)
        with contextlib.suppress(Exception):
            self.future.result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    @property
    def url(self) -> str:
        assert self.feed is not None
        return self.feed.url


class WatcherProcess:
    """bench/feed_watcher.py with `count` connections; see its docstring for the protocol."""

    def __init__(self, url: str, count: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(WATCHER_SCRIPT), url, VIEWER, str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )

    def wait_ready(self) -> None:
        assert self.proc.stdout is not None
        ready: list[str] = []
        reader = threading.Thread(target=lambda: ready.append(self.proc.stdout.readline()))
        reader.start()
        reader.join(READY_TIMEOUT)
        if not ready or ready[0].strip() != "ready":
            self.kill()
            raise RuntimeError(f"the watchers did not connect: {ready}")

    def stop(self, last_seq: int) -> dict[str, Any]:
        try:
            out, _ = self.proc.communicate(f"stop {last_seq}\n", timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        return json.loads(out)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


@contextlib.contextmanager
def watched(engine: Engine, watchers: int) -> Iterator[tuple[ServedEngine, WatcherProcess | None]]:
    with ServedEngine(engine) as served:
        process = WatcherProcess(served.url, watchers) if watchers else None
        try:
            if process is not None:
                process.wait_ready()
            yield served, process
        finally:
            if process is not None:
                process.kill()


# -- 1. streaming --------------------------------------------------------------------------------


@dataclass
class Stream:
    rate: int
    offered: float  # events/s the source achieved
    delivered_min: float
    delivered_median: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    resyncs: int  # snapshots after the first, all watchers together
    lost: int  # events that never reached a watcher (covered by a resync snapshot instead)
    errors: list[str]
    frames_per_watcher: float
    server_cpu: float  # the server process's CPU seconds per wall second
    watcher_cpu: float  # the watcher process's


def drive(engine: Engine, keys: list[str], rate: int, seconds: float) -> dict[int, float]:
    """Emit `rate` events/s through the engine's call path for `seconds`; seq -> emit wall."""
    emitted: dict[int, float] = {}
    total = int(rate * seconds)
    start = time.perf_counter()
    done = 0
    nkeys = len(keys)
    while done < total:
        due = min(total, int((time.perf_counter() - start) * rate) + 1)
        while done < due:
            line = one_call(engine, keys[done % nkeys])
            emitted[line.seq] = line.wall
            done += 1
        time.sleep(0.001)
    return emitted


def _percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def stream(rate: int, seconds: float = STREAM_SECONDS, watchers: int = WATCHERS) -> Stream:
    engine, keys = make_engine(KEYS)
    with watched(engine, watchers) as (_, process):
        assert process is not None
        cpu0, wall0 = time.process_time(), time.perf_counter()
        emitted = drive(engine, keys, rate, seconds)
        offered = len(emitted) / (time.perf_counter() - wall0)
        report = process.stop(engine.seq)
        cpu = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
    first_emit = min(emitted.values())
    lags: list[float] = []
    rates: list[float] = []
    lost = resyncs = 0
    errors: list[str] = []
    for watcher in report["watchers"]:
        got = 0
        last_at = first_emit
        for at, first, last in watcher["frames"]:
            for seq in range(first, last + 1):
                wall = emitted.get(seq)
                if wall is not None:
                    lags.append(at - wall)
                    got += 1
                    last_at = at
        lost += len(emitted) - got
        resyncs += watcher["snapshots"] - 1
        errors += watcher["errors"]
        rates.append(got / max(last_at - first_emit, 1e-9))
    lags.sort()
    rates.sort()
    return Stream(
        rate=rate,
        offered=offered,
        delivered_min=rates[0],
        delivered_median=rates[len(rates) // 2],
        p50_ms=_percentile(lags, 0.50) * 1e3,
        p99_ms=_percentile(lags, 0.99) * 1e3,
        max_ms=lags[-1] * 1e3,
        resyncs=resyncs,
        lost=lost,
        errors=errors,
        frames_per_watcher=sum(len(w["frames"]) for w in report["watchers"]) / WATCHERS,
        server_cpu=cpu,
        watcher_cpu=report["cpu"],
    )


# -- 2. the call path with and without watchers ------------------------------------------------


@dataclass
class CallPath:
    label: str
    calls_per_second: float
    p99_burst_us: float  # the 99th percentile of one burst's time, per call
    server_cpu: float


def paced_calls(engine: Engine, key: str, seconds: float) -> tuple[float, float]:
    """Calls at CALL_RATE in bursts of CALL_BURST for `seconds`: calls/s over the time spent in
    calls (the first CALL_WARMUP seconds not counted), and the p99 burst per call (µs)."""
    period = CALL_BURST / CALL_RATE
    start = time.perf_counter()
    tick = start
    bursts: list[float] = []
    while True:
        t0 = time.perf_counter()
        if t0 - start >= seconds:
            break
        for _ in range(CALL_BURST):
            one_call(engine, key)
        t1 = time.perf_counter()
        if t0 - start >= CALL_WARMUP:
            bursts.append(t1 - t0)
        tick += period
        pause = tick - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
    spent = sum(bursts)
    bursts.sort()
    return len(bursts) * CALL_BURST / spent, _percentile(bursts, 0.99) / CALL_BURST * 1e6


def call_path(watchers: int | None, seconds: float = CALL_SECONDS) -> CallPath:
    """`watchers` None: no feed at all; 0: the feed served, nobody connected; else that many."""
    engine, keys = make_engine(1)
    if watchers is None:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        rate, p99 = paced_calls(engine, keys[0], seconds)
        cpu = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
        return CallPath("no feed (no listener)", rate, p99, cpu)
    with watched(engine, watchers) as (_, process):
        cpu0, wall0 = time.process_time(), time.perf_counter()
        rate, p99 = paced_calls(engine, keys[0], seconds)
        cpu = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
        if process is not None:
            report = process.stop(engine.seq)
            errors = [e for w in report["watchers"] for e in w["errors"]]
            resyncs = sum(w["snapshots"] - 1 for w in report["watchers"])
            if errors or resyncs:
                _progress(f"  call path: {resyncs} resyncs, errors {errors[:3]}")
    label = f"feed, {watchers} watchers" if watchers else "feed served, no watcher"
    return CallPath(label, rate, p99, cpu)


# -- the table -----------------------------------------------------------------------------------


def run() -> tuple[list[Stream], list[CallPath]]:
    streams = []
    for rate in RATES:
        _progress(f"feed: {WATCHERS} watchers at {rate:,} events/s ...")
        streams.append(stream(rate))
    _progress("feed: call path with and without watchers ...")
    calls = [call_path(None), call_path(0), call_path(WATCHERS)]
    return streams, calls


def render(streams: list[Stream], calls: list[CallPath], seconds: float) -> str:
    lines = [
        f"breakerdeck feed bench · CPython {platform.python_version()} · {platform.machine()} · "
        f"{os.cpu_count()} cores · loopback",
        f"{WATCHERS} watchers in a separate process (websockets client, envelope checked); "
        f"{STREAM_SECONDS:g} s per rate; events from the engine's call path on a thread",
        "",
        *table_header(),
        f"live feed: events/s delivered to each of {WATCHERS} watchers, slowest"
        " (ratio: of offered)",
    ]
    for s in streams:
        top = s.rate == TARGET_RATE
        lines.append(
            table_row(
                f"offered {s.rate:,}/s (source made {s.offered:,.0f}/s)",
                f"{s.delivered_min:,.0f}",
                f"{s.delivered_min / s.rate:.2f}x",
                f"≥ {TARGET_RATE:,}" if top else "",
                yes(s.delivered_min >= 0.99 * TARGET_RATE) if top else "",
            )
        )
    lines += ["", "live feed: lag from the engine's emit to a watcher's read, p50 (ms)"]
    lines += [table_row(f"at {s.rate:,}/s", f"{s.p50_ms:.1f}") for s in streams]
    lines += ["", "live feed: lag, p99 over every event of every watcher (ms)"]
    for s in streams:
        ok = s.p99_ms < TARGET_P99_MS
        lines.append(
            table_row(
                f"at {s.rate:,}/s (max {s.max_ms:.0f})",
                f"{s.p99_ms:.1f}",
                "-",
                f"< {TARGET_P99_MS:.0f}",
                yes(ok),
            )
        )
    lines += ["", "live feed: resyncs (snapshots after the first) / events lost / bad envelopes"]
    for s in streams:
        lines.append(
            table_row(
                f"at {s.rate:,}/s",
                f"{s.resyncs}/{s.lost}/{len(s.errors)}",
                "-",
                "0/0/0",
                yes(not s.resyncs and not s.lost and not s.errors),
            )
        )
    lines += ["", "live feed: frames per watcher (value); CPU s per s, server + watcher processes"]
    for s in streams:
        lines.append(
            table_row(
                f"at {s.rate:,}/s",
                f"{s.frames_per_watcher:,.0f}",
                f"{s.server_cpu:.2f}+{s.watcher_cpu:.2f}",
            )
        )
    base, served, full = calls
    lines += [
        "",
        f"call path: enter+admit+complete, paced {CALL_RATE:,}/s (calls/s; ratio: of no feed)",
    ]
    floor = 1 - TARGET_SLOWDOWN
    for c in calls:
        ratio = c.calls_per_second / base.calls_per_second
        mine = c is full
        lines.append(
            table_row(
                c.label,
                f"{c.calls_per_second:,.0f}",
                f"{ratio:.2f}x",
                f"≥ {floor:.2f}x" if mine else "",
                yes(ratio >= floor) if mine else "",
            )
        )
    marginal = full.calls_per_second / served.calls_per_second
    lines.append(
        table_row(
            f"{WATCHERS} watchers vs feed with no watcher",
            f"{full.calls_per_second:,.0f}",
            f"{marginal:.2f}x",
            f"≥ {floor:.2f}x",
            yes(marginal >= floor),
        )
    )
    lines += ["", "call path: p99 burst, per call (µs); ratio column: server CPU s per s"]
    lines += [table_row(c.label, f"{c.p99_burst_us:.2f}", f"{c.server_cpu:.2f}") for c in calls]
    errors = [e for s in streams for e in s.errors]
    if errors:
        lines += ["", "envelope errors (first few):", *(f"  {e}" for e in errors[:5])]
    lines += ["", f"feed section took {seconds:.1f} s"]
    return "\n".join(lines)


def main() -> None:
    start = time.perf_counter()
    streams, calls = run()
    print(render(streams, calls, time.perf_counter() - start))


if __name__ == "__main__":
    main()
