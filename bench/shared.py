"""Replicas on one Redis (issue 13, "Speed"): each target printed beside its figure.

Printed, never asserted. One `redis-server` (tests/redis_server.py: Debian's binary on a free
loopback port, nothing on disk) serves every part, one part at a time, so the server's own
counters see only the part being measured:

1. Closed path: `enter` → `admit` → `complete` of a healthy call on an `Engine` (agent
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

Each part is a module of its own (bench/shared_closed.py, shared_propagation.py,
shared_trips.py, shared_gateways.py; what they share in shared_setup.py); this one runs them
against one server and prints the table. Run alone: `.venv/bin/python bench/shared.py`. Needs
`redis-server` and `wrk` (apt).
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import table_header, table_row, yes
from bench.gateway import DURATION
from bench.shared_closed import Closed, closed_path
from bench.shared_gateways import Gateways, gateways
from bench.shared_propagation import Propagation, propagation
from bench.shared_setup import (
    CLOSED_REPEATS,
    CONNECTIONS,
    TARGET_CLOSED,
    TARGET_P99_MS,
    TRIPS,
    WRK_REPEATS,
    progress,
)
from bench.shared_trips import Trips, round_trips
from tests.redis_server import RedisServer, RedisServerMissing


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
            progress("round trips per operation, counted at the server ...")
            trips = round_trips(server)
            progress("closed path, shared store on against off ...")
            closed = closed_path(server.url)
            progress(f"propagation, engine to engine, {TRIPS} trips ...")
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
    main()
