"""Sentinel failovers under calls, longer than the test (issue 34's closing figures): printed,
never asserted.

tests/front/sentinel_soak.py's rig: a primary, its replica and three sentinels on loopback
(Debian's `redis-server`, down after 500 ms), two `breakerdeck gateway --shared
redis+sentinel://…` processes on the fixture platforms, counted at their wire. Each round:
clients call both replicas without pause (an agent open from the start, refused; a healthy
one, served); an agent is tripped through the gateways and at once the primary fails over,
one of three ways in turn: `kill -9` of the primary; of the primary and the sentinel on its
host; a planned failover (`SENTINEL FAILOVER`) that leaves the old primary up. The round goes
on until both replicas serve the new primary, and `--settle` seconds more. Then
`--probe-calls` calls at once for an agent due for half-open, over both replicas, the probes
counted at the platform; then the set is mended (the killed node back as the new primary's
replica, the killed sentinel back) and the next round fails that primary over.

Per round: the seconds each replica said "shared store lost" (`/-/healthz`, polled every
20 ms), the calls each answered meanwhile and in the whole round by status, the probes per
half-open, and each agent's verdict on each replica and in the store before and after.

Run: `.venv/bin/python -m bench.failover [--rounds 6] [--kinds kill,host,planned] [--clients 8]
[--settle 3]`.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.shared_setup import progress
from tests.front.sentinel_soak import BUSY, KINDS, OPEN, Kind, Round, Soak
from tests.redis_server import RedisServerMissing

SAID: dict[Kind, str] = {
    "kill": "the primary killed (kill -9)",
    "host": "the primary and the sentinel on its host killed (kill -9)",
    "planned": "a planned failover (SENTINEL FAILOVER), the old primary left up",
}
#: What every call of the clients must get: the open agent refused, the healthy one served.
EXPECTED = {(OPEN, 403, "circuit_breaker_open"), (BUSY, 200, None)}


@dataclass
class Figures:
    kind: Kind
    round: Round
    tripped: str
    before: dict[str, list[str]]
    after: dict[str, list[str]]
    probes: int
    others: Counter[tuple[int, str | None]]


async def soak(kinds: list[Kind], clients: int, settle: float, probe_calls: int) -> list[Figures]:
    tripped = [f"tripped-{n}" for n in range(len(kinds))]
    probed = [f"probed-{n}" for n in range(len(kinds))]
    figures: list[Figures] = []
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as tmp:
        progress("starting the Sentinel set, the platforms and two gateways ...")
        rig = Soak(Path(tmp), tuple(tripped), tuple(probed))
        try:
            await rig.start()
            limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
            async with httpx.AsyncClient(timeout=10, limits=limits) as http:
                await rig.trip(http, OPEN)
                for n, kind in enumerate(kinds):
                    progress(f"round {n + 1} of {len(kinds)}: {SAID[kind]} ...")
                    watched = [OPEN, *tripped[: n + 1], probed[n]]
                    before = {agent: await rig.states(http, agent) for agent in watched}
                    made = await rig.failover(http, tripped[n], clients, settle, kind)
                    after = {agent: await rig.states(http, agent) for agent in watched}
                    reached = rig.ledger.requests
                    answers = await rig.probes(http, probed[n], probe_calls)
                    others = Counter((a.status, a.reason) for a in answers)
                    probes = rig.ledger.requests - reached
                    figures.append(Figures(kind, made, tripped[n], before, after, probes, others))
                    if n + 1 < len(kinds):
                        progress("mending the set ...")
                        rig.sentinels.mend()
        finally:
            rig.close()
    return figures


def _statuses(counts: Counter[int]) -> str:
    return ", ".join(f"{status} ×{n}" for status, n in sorted(counts.items())) or "none"


def _round(n: int, f: Figures) -> list[str]:
    r = f.round
    lines = [f"round {n}: {SAID[f.kind]}; {f.tripped} tripped just before"]
    for replica, name in enumerate("ab"):
        spans = ", ".join(
            f"{start - r.began:+.2f} to {end - r.began:+.2f} s" for start, end in r.lost(replica)
        )
        total = Counter(a.status for a in r.answers if a.replica == replica)
        lines.append(
            f"  replica {name}: shared store lost {r.lost_seconds(replica):.2f} s ({spans} from "
            f"the failover); answered meanwhile {_statuses(r.during_loss(replica))}; "
            f"in the round {_statuses(total)}"
        )
    wrong = sum((a.agent, a.status, a.reason) not in EXPECTED for a in r.answers)
    lines.append(f"  answers other than {OPEN} refused (403) and {BUSY} served (200): {wrong}")
    others = ", ".join(f"{s} {why} ×{k}" for (s, why), k in sorted(f.others.items()))
    lines.append(
        f"  the half-open after it: {f.probes} probe(s) at the platform of "
        f"{f.probes + sum(f.others.values())} calls at once; the others {others}"
    )
    lines.append("  verdicts (replica a / replica b / store), before → after:")
    lines += [
        f"    {agent:<12} {' / '.join(f.before[agent])} → {' / '.join(f.after[agent])}"
        for agent in f.before
    ]
    return lines


def report(figures: list[Figures], clients: int, settle: float, seconds: float) -> list[str]:
    lines = [
        f"breakerdeck gateways through Sentinel failovers · CPython {platform.python_version()} "
        f"· {platform.machine()} · loopback · 2 gateways · {clients} clients · down-after 500 ms",
        "",
    ]
    for n, f in enumerate(figures, 1):
        lines += [*_round(n, f), ""]
    lines.append("by kind of failover (each replica's figures in each round):")
    for kind in KINDS:
        mine = [f for f in figures if f.kind == kind]
        if not mine:
            continue
        lost = [f.round.lost_seconds(n) for f in mine for n in (0, 1)]
        during: Counter[int] = Counter()
        for f in mine:
            for n in (0, 1):
                during += f.round.during_loss(n)
        changed = sum(
            f.before[agent] != f.after[agent]
            for f in mine
            for agent in f.before
            if agent != f.tripped
        )
        tripped_open = sum(f.after[f.tripped] == ["open"] * 3 for f in mine)
        lines += [
            f"  {kind}: shared store lost {min(lost):.2f} to {max(lost):.2f} s; calls answered "
            f"meanwhile {_statuses(during)}; probes per half-open "
            f"{', '.join(str(f.probes) for f in mine)}; verdicts changed {changed}; "
            f"tripped just before and open everywhere after: {tripped_open} of {len(mine)}"
        ]
    lines.append(f"the soak took {seconds:.1f} s (settle {settle:g} s after each recovery)")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument(
        "--kinds", default=",".join(KINDS), help="the failovers, taken in turn round by round"
    )
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--settle", type=float, default=3.0)
    parser.add_argument("--probe-calls", type=int, default=40)
    args = parser.parse_args()
    chosen = [kind for kind in KINDS if kind in args.kinds.split(",")]
    kinds = [chosen[n % len(chosen)] for n in range(args.rounds)]
    began = time.monotonic()
    try:
        figures = asyncio.run(soak(kinds, args.clients, args.settle, args.probe_calls))
    except RedisServerMissing as error:
        sys.exit(str(error))
    print("\n".join(report(figures, args.clients, args.settle, time.monotonic() - began)))


if __name__ == "__main__":
    main()
