"""The console at 10,000 breakers: first paint, idle ticking, an event flood, memory.

Run from the repository root: `.venv/bin/python bench/console.py` (bench/run.py runs it in a
child process, so its peak memory is the console's alone). Printed, never asserted; every
phase is bounded in time and the app is told to exit at the end.

- The engine: `Engine(AgentPolicy())` on a `ManualClock`, with a state directory (the audit log
  the app seeds its cards from), 10,000 agents made real through the engine's own call path
  (`enter`, `admit`, `complete`): every third one trips (five counted upstream failures, or
  three counted auth failures for every sixth) and then has one call denied; the others make a
  healthy call, every tenth of them two counted failures. The clock moves between trips so the
  countdowns differ and none is due during the run.
- The app: `BreakerdeckApp` over `InProcessSource`, as `breakerdeck demo` builds it, run with
  `App.run_async(size=(200, 60))` and a driver that has no terminal but is not "headless" to
  Textual: every frame is encoded into terminal sequences as over SSH (the bytes are counted,
  then dropped). First paint: from `run_async` being started to the first frame written with
  the dashboard's cards laid out.
- Idle: 10 s with nothing happening but the app's one-second tick; the bench advances the
  manual clock by 1 s every second, as the demo's simulation moves time. CPU is the process's
  (`time.process_time`, every thread) over wall time, as a share of one core.
- Flood: a thread drives the engine at 1,000 events/s for 10 s (bursts of 10 every 10 ms),
  a third each of denied calls on open breakers, healthy calls and single counted failures on
  closed ones: one event per call, as the demo's simulation thread makes them. Backlog, each
  second: the engine's last seq minus the last seq the app's board applied
  (`Board.seen_seq`), and what waits in the bus subscription's buffer.
- Memory: the process's peak RSS (`VmHWM`), and its RSS once the engine was built.
"""

from __future__ import annotations

import asyncio
import contextlib
import cProfile
import os
import platform
import pstats
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from textual.drivers.headless_driver import HeadlessDriver

from bench.common import table_header, table_row, yes
from breakerdeck.console.app import BreakerdeckApp
from breakerdeck.console.screens.dashboard import DashboardScreen
from breakerdeck.console.source import InProcessSource
from breakerdeck.console.widgets.cards import CardList
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.outcomes import SUCCESS, Outcome, OutcomeClass
from breakerdeck.engine.policy import AgentPolicy

BREAKERS = 10_000
SIZE = (200, 60)
PLATFORMS = ("payments", "crm", "email", "search")
SPREAD_SECONDS = 240.0  # trips spread over this much simulated time: none due within the run
IDLE_SECONDS = 10
FLOOD_RATE = 1_000
FLOOD_SECONDS = 10
BURST_EVERY = 0.01
SETTLE_SECONDS = 1.0
PAINT_TIMEOUT = 30.0
DRAIN_TIMEOUT = 10.0

#: `--profile`: cProfile the app's thread during the flood, the top functions to stderr.
PROFILE = "--profile" in sys.argv

TARGET_PAINT_S = 1.0
TARGET_IDLE_PCT = 5.0
TARGET_MB = 150.0

UPSTREAM = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="connection refused")
AUTH = Outcome(OutcomeClass.AUTH_FAILURE, counted=True, detail="credential rejected")


def _progress(text: str) -> None:
    # sys.__stderr__: while the app runs, Textual captures sys.stderr
    print(text, file=sys.__stderr__, flush=True)


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mb() -> float:
    """VmHWM, not ru_maxrss: a child started by a big parent inherits the parent's ru_maxrss
    across fork and exec, while VmHWM belongs to this process's own memory map."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# -- the engine ------------------------------------------------------------------------------


def call(engine: Engine, agent: str, platform_name: str, outcome: Outcome | None) -> None:
    """One call through the engine's API; `None`: expect a refusal (the breaker is open)."""
    ticket = engine.enter(
        key=agent, agent=agent, platform=platform_name, tool=platform_name, deadline_seconds=30.0
    )
    admission = engine.admit(ticket, 30.0)
    if not admission.allowed:
        return
    ticket.attempts = 1
    if outcome is None:
        outcome = SUCCESS
    if outcome is SUCCESS:
        engine.complete(ticket, outcome, fault="ok", agent_status=200, platform_status=200)
    elif outcome.cls is OutcomeClass.AUTH_FAILURE:
        engine.complete(
            ticket, outcome, fault="revoked", agent_status=401, refresh="failed",
            platform_status=401,
        )  # fmt: skip
    else:
        engine.complete(ticket, outcome, fault="refused", agent_status=502)


def build(state_dir: str) -> tuple[Engine, ManualClock, list[str], list[str]]:
    clock = ManualClock(now=12 * 3600.0)
    engine = Engine(AgentPolicy(), clock=clock, state_dir=state_dir)
    opened: list[str] = []
    closed: list[str] = []
    step = SPREAD_SECONDS / (BREAKERS // 3 + 1)
    for i in range(BREAKERS):
        agent = f"agent-{i:05d}"
        where = PLATFORMS[i % len(PLATFORMS)]
        if i % 3 == 0:
            auth = i % 6 == 0
            for _ in range(3 if auth else 5):
                call(engine, agent, where, AUTH if auth else UPSTREAM)
            clock.advance(step)
            call(engine, agent, where, None)  # denied: shows on the card
            opened.append(agent)
        else:
            call(engine, agent, where, SUCCESS)
            if i % 10 == 1:
                call(engine, agent, where, UPSTREAM)
                call(engine, agent, where, UPSTREAM)
            closed.append(agent)
    states = [view.state for view in engine.views()]
    assert states.count("open") == len(opened), "every third breaker must be open"
    assert engine.audit is not None
    engine.audit.flush()
    return engine, clock, opened, closed


# -- the app ---------------------------------------------------------------------------------


class CountingDriver(HeadlessDriver):
    """No terminal, but Textual encodes every frame for it (as for a real one): bytes counted."""

    written = 0

    @property
    def is_headless(self) -> bool:
        return False

    def write(self, data: str) -> None:
        CountingDriver.written += len(data.encode("utf-8"))

    def flush(self) -> None:
        pass


class BenchApp(BreakerdeckApp):
    """The console as the demo runs it, noting when the dashboard's first frame is out."""

    # Textual reads CSS_PATH next to the subclass's module: point it back at the console's.
    CSS_PATH = str(
        Path(sys.modules[BreakerdeckApp.__module__].__file__ or "").with_name("breakerdeck.tcss")
    )
    first_paint: float | None = None
    first_paint_cpu: float | None = None
    frames = 0

    def post_display_hook(self) -> None:
        self.frames += 1
        if self.first_paint is not None:
            return
        screen = self.screen
        if not isinstance(screen, DashboardScreen):
            return
        cards = screen.query(CardList).first() if screen.is_mounted else None
        if cards is None or not cards.cards or not cards.size.height:
            return
        self.first_paint = time.perf_counter()
        self.first_paint_cpu = time.process_time()


@dataclass
class Sample:
    second: int
    emitted: int
    applied: int
    buffered: int
    resyncs: int

    @property
    def backlog(self) -> int:
        return self.emitted - self.applied


@dataclass
class Result:
    build_s: float = 0.0
    engine_rss_mb: float = 0.0
    paint_s: float = float("nan")
    paint_cpu_s: float = float("nan")
    idle_cpu_pct: float = float("nan")
    idle_bytes_per_s: float = 0.0
    idle_frames_per_s: float = 0.0
    flood_cpu_pct: float = float("nan")
    flood_app_cpu_pct: float = float("nan")
    flood_rate: float = 0.0
    flood_bytes_per_s: float = 0.0
    flood_frames_per_s: float = 0.0
    samples: list[Sample] = field(default_factory=list)
    drain_s: float | None = None
    resyncs: int = 0
    peak_mb: float = 0.0
    seconds: float = 0.0


class Flood(threading.Thread):
    """The engine's other thread: calls at a fixed rate, sampling the app's backlog each second."""

    def __init__(self, engine: Engine, app: BenchApp, opened: list[str], closed: list[str]):
        super().__init__(name="bench flood", daemon=True)
        self.engine, self.app = engine, app
        self.opened, self.closed = opened, closed
        self.samples: list[Sample] = []
        self.made = 0
        self.cpu = 0.0
        self.wall = 0.0

    def _sample(self, second: int, seq0: int) -> None:
        subscriptions = self.app.source._subscriptions  # type: ignore[attr-defined]
        buffered = len(subscriptions[0]._items) if subscriptions else 0
        self.samples.append(
            Sample(
                second,
                self.engine.seq - seq0,
                max(0, self.app.board.seen_seq - seq0),
                buffered,
                self.app.resyncs,
            )
        )

    def run(self) -> None:
        cpu0 = time.thread_time()
        seq0 = self.engine.seq
        burst = round(FLOOD_RATE * BURST_EVERY)
        start = time.perf_counter()
        next_sample = 1
        n = 0
        while True:
            elapsed = time.perf_counter() - start
            if elapsed >= next_sample:
                self._sample(next_sample, seq0)
                next_sample += 1
            if elapsed >= FLOOD_SECONDS:
                break
            due = int(elapsed / BURST_EVERY) + 1  # bursts due by now, this one included
            while self.made < due * burst and self.made < FLOOD_RATE * FLOOD_SECONDS:
                kind = n % 3
                if kind == 0:
                    agent = self.opened[(n // 3) % len(self.opened)]
                    call(self.engine, agent, PLATFORMS[n % 4], None)
                else:
                    agent = self.closed[n % len(self.closed)]
                    call(self.engine, agent, PLATFORMS[n % 4], SUCCESS if kind == 1 else UPSTREAM)
                n += 1
                self.made += 1
            pause = (due * BURST_EVERY) - (time.perf_counter() - start)
            if pause > 0:
                time.sleep(pause)
        self.wall = time.perf_counter() - start
        self.cpu = time.thread_time() - cpu0


async def _advance_clock(clock: ManualClock, seconds: int) -> None:
    """Simulated time moves 1 s every real second, as the demo's simulation moves it."""
    start = time.perf_counter()
    for second in range(1, seconds + 1):
        await asyncio.sleep(max(0.0, start + second - time.perf_counter()))
        clock.advance(1.0)


async def measure(result: Result) -> None:
    with tempfile.TemporaryDirectory(prefix="breakerdeck-bench-") as state_dir:
        _progress(f"console: building {BREAKERS:,} breakers ...")
        t = time.perf_counter()
        engine, clock, opened, closed = build(state_dir)
        result.build_s = time.perf_counter() - t
        result.engine_rss_mb = _rss_mb()
        source = InProcessSource(engine, label="bench", speed=1.0)
        app = BenchApp(source, operator="bench")
        app.driver_class = CountingDriver
        try:
            await _drive(app, engine, clock, opened, closed, result)
        finally:
            engine.close()


async def _drive(
    app: BenchApp,
    engine: Engine,
    clock: ManualClock,
    opened: list[str],
    closed: list[str],
    result: Result,
) -> None:
    _progress("console: first paint at 200x60 ...")
    t0, cpu0 = time.perf_counter(), time.process_time()
    runner = asyncio.create_task(app.run_async(size=SIZE, mouse=False))
    try:
        deadline = t0 + PAINT_TIMEOUT
        while app.first_paint is None and time.perf_counter() < deadline and not runner.done():
            await asyncio.sleep(0.005)
        if app.first_paint is None or app.first_paint_cpu is None:
            raise RuntimeError("the dashboard never painted")
        result.paint_s = app.first_paint - t0
        result.paint_cpu_s = app.first_paint_cpu - cpu0
        await asyncio.sleep(SETTLE_SECONDS)

        _progress(f"console: idle for {IDLE_SECONDS} s ...")
        frames, written = app.frames, CountingDriver.written
        t, cpu = time.perf_counter(), time.process_time()
        await _advance_clock(clock, IDLE_SECONDS)
        wall = time.perf_counter() - t
        result.idle_cpu_pct = 100 * (time.process_time() - cpu) / wall
        result.idle_bytes_per_s = (CountingDriver.written - written) / wall
        result.idle_frames_per_s = (app.frames - frames) / wall

        _progress(f"console: {FLOOD_RATE:,} events/s for {FLOOD_SECONDS} s ...")
        flood = Flood(engine, app, opened, closed)
        frames, written = app.frames, CountingDriver.written
        t, cpu = time.perf_counter(), time.process_time()
        profiler = cProfile.Profile() if PROFILE else None
        if profiler is not None:
            profiler.enable()  # the app's thread (the event loop's) only
        flood.start()
        clock_task = asyncio.create_task(_advance_clock(clock, FLOOD_SECONDS))
        while flood.is_alive():
            await asyncio.sleep(0.05)
        wall = time.perf_counter() - t
        spent = time.process_time() - cpu
        clock_task.cancel()
        if profiler is not None:
            profiler.disable()
            stats = pstats.Stats(profiler, stream=sys.__stderr__)
            stats.sort_stats("cumulative").print_stats(40)
            stats.sort_stats("tottime").print_stats(25)
            if os.environ.get("BENCH_PROFILE_DUMP"):
                stats.dump_stats(os.environ["BENCH_PROFILE_DUMP"])
        result.flood_cpu_pct = 100 * spent / wall
        result.flood_app_cpu_pct = 100 * (spent - flood.cpu) / wall
        result.flood_rate = flood.made / flood.wall
        result.flood_bytes_per_s = (CountingDriver.written - written) / wall
        result.flood_frames_per_s = (app.frames - frames) / wall
        result.samples = flood.samples
        t = time.perf_counter()
        while time.perf_counter() - t < DRAIN_TIMEOUT:
            if app.board.seen_seq >= engine.seq:
                result.drain_s = time.perf_counter() - t
                break
            await asyncio.sleep(0.005)
        result.resyncs = app.resyncs - 1  # the first snapshot is not a resync
    finally:
        app.exit()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(runner, 10.0)
        result.peak_mb = _peak_mb()


# -- the table -------------------------------------------------------------------------------


def growing(samples: list[Sample]) -> bool:
    """The backlog grows if the last seconds hold more than the first ones by over a second's
    worth of events, or the app had to resync (its buffer overflowed)."""
    if not samples:
        return True
    if any(s.resyncs > 1 for s in samples):
        return True
    head = max(s.backlog for s in samples[:3])
    tail = max(s.backlog for s in samples[-3:])
    return tail > head + FLOOD_RATE


def render(r: Result) -> str:
    lines = [
        f"breakerdeck console bench · CPython {platform.python_version()} · "
        f"{platform.machine()} · {os.cpu_count()} cores · textual {_textual()}",
        f"{BREAKERS:,} breakers ({len(range(0, BREAKERS, 3)):,} open) in an in-process engine "
        f"with an audit log, built in {r.build_s:.1f} s through its call path; "
        f"{SIZE[0]}x{SIZE[1]}, frames encoded as for a terminal, then dropped",
        "",
        *table_header(),
        "first paint: run_async start to the dashboard's first frame (s; ratio: CPU s)",
        table_row(
            "dashboard with cards",
            f"{r.paint_s:.3f}",
            f"{r.paint_cpu_s:.3f}",
            f"< {TARGET_PAINT_S:g}",
            yes(r.paint_s < TARGET_PAINT_S),
        ),
        "",
        f"idle: {IDLE_SECONDS} s of countdown ticks, clock +1 s a second (% of one core; "
        "ratio: frames/s)",
        table_row(
            f"process ({r.idle_bytes_per_s:,.0f} B/s written)",
            f"{r.idle_cpu_pct:.1f}",
            f"{r.idle_frames_per_s:.1f}",
            f"< {TARGET_IDLE_PCT:g}",
            yes(r.idle_cpu_pct < TARGET_IDLE_PCT),
        ),
        "",
        f"flood: {FLOOD_RATE:,} events/s for {FLOOD_SECONDS} s from an engine thread "
        "(% of one core; ratio: frames/s)",
        table_row(f"process (the thread made {r.flood_rate:,.0f}/s)", f"{r.flood_cpu_pct:.1f}"),
        table_row(
            "app: process minus the engine thread",
            f"{r.flood_app_cpu_pct:.1f}",
            f"{r.flood_frames_per_s:.1f}",
        ),
        table_row("bytes written per second", f"{r.flood_bytes_per_s:,.0f}"),
        "",
        "flood: backlog each second, events emitted but not yet applied by the app "
        "(ratio: in the bus buffer)",
    ]
    lines += [
        table_row(
            f"at {s.second:>2} s ({s.emitted:,} emitted)", f"{s.backlog:,}", f"{s.buffered:,}"
        )
        for s in r.samples
    ]
    grows = growing(r.samples)
    drained = "never" if r.drain_s is None else f"{r.drain_s:.2f} s"
    lines.append(
        table_row(
            f"growing? (resyncs {r.resyncs}; drained in {drained})",
            "yes" if grows else "no",
            "-",
            "no",
            yes(not grows and r.drain_s is not None),
        )
    )
    lines += [
        "",
        "memory: process peak RSS, VmHWM (MB; ratio: RSS with the engine built, pre-app)",
        table_row(
            "peak",
            f"{r.peak_mb:.0f}",
            f"{r.engine_rss_mb:.0f}",
            f"< {TARGET_MB:g}",
            yes(r.peak_mb < TARGET_MB),
        ),
        "",
        f"console section took {r.seconds:.1f} s",
    ]
    return "\n".join(lines)


def _textual() -> str:
    from importlib.metadata import version

    return version("textual")


def main() -> None:
    start = time.perf_counter()
    result = Result()
    asyncio.run(measure(result))
    result.seconds = time.perf_counter() - start
    print(render(result), flush=True)


if __name__ == "__main__":
    main()
