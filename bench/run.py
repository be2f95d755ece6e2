"""breakerdeck's engine against the Python peer breakers: one table, printed, never asserted.

Run from the repository root: `.venv/bin/python bench/run.py` (or `make bench`); then the
live feed's table (bench/feed.py) and the console's (bench/console.py, in a child process so
its peak memory is its own), the gateway (bench/gateway.py) and its replicas on one Redis
(bench/shared.py), and telemetry's cost (bench/telemetry.py). `--only NAME` runs one.
Progress goes to standard error; the tables to standard output.
"""

from __future__ import annotations

import asyncio
import platform
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import measure, ours, peers
from bench.common import CALLERS, awork, work

US = 1e6


@dataclass
class Metric:
    title: str
    unit: str
    target: str
    met: Callable[[float], bool]
    digits: int = 2
    ratio: bool = True
    rows: list[tuple[str, float | None, bool]] = field(default_factory=list)

    def add(self, label: str, value: float | None, is_ours: bool) -> None:
        self.rows.append((label, value, is_ours))


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _label(subject: Any, metric: str) -> str:
    if subject is ours.HarnessSubject:
        return {
            "sync": "ours (c) Harness.guard",
            "async": "ours (c) Harness.call_tool",
            "agent": "ours (c) Gateway.call (async)",
        }.get(metric, "ours (c) Harness.guard")
    if subject is peers.PyBreaker and metric == "async":
        return f"{subject.label} (calling())"
    return subject.label


def run() -> tuple[list[Metric], dict[str, float]]:
    loop = asyncio.new_event_loop()
    subjects = [*ours.SUBJECTS, *peers.SUBJECTS]
    baseline: dict[str, float] = {}
    metrics: list[Metric] = []

    _progress("closed path overhead ...")
    sync = Metric(
        "closed path: overhead per guarded call, sync", "µs", "≤ 0.30", lambda v: v <= 0.30
    )
    asyn = Metric(
        "closed path: overhead per guarded call, async", "µs", "≤ 0.45", lambda v: v <= 0.45
    )
    baseline["sync"] = measure.per_call(work) * US
    baseline["async"] = measure.per_call_async(loop, awork) * US
    for subject in subjects:
        s = subject(3600.0)
        sync.add(
            _label(subject, "sync"),
            measure.overhead(s.guard(work), work) * US,
            subject in ours.SUBJECTS,
        )
        s = subject(3600.0)
        asyn.add(
            _label(subject, "async"),
            measure.overhead_async(loop, s.guard_async(awork), awork) * US,
            subject in ours.SUBJECTS,
        )
    metrics += [sync, asyn]

    _progress("open path fast-fail ...")
    tool = Metric(
        "open path: one fast-fail, tool circuit_open result + denial event",
        "µs",
        "≤ 1.10",
        lambda v: v <= 1.10,
    )
    agent = Metric(
        "open path: one fast-fail, agent 403 agent_halted body + denial event",
        "µs",
        "≤ 2.00",
        lambda v: v <= 2.00,
    )
    for subject in subjects:
        is_ours = subject in ours.SUBJECTS
        tool.add(
            _label(subject, "sync"),
            measure.per_call(subject(3600.0).fast_fail_tool()) * US,
            is_ours,
        )
        fast_fail = subject(3600.0).fast_fail_agent()
        if getattr(subject, "fast_fail_agent_is_async", False):
            value = measure.per_call_async(loop, fast_fail) * US
        else:
            value = measure.per_call(fast_fail) * US
        agent.add(_label(subject, "agent"), value, is_ours)
    metrics += [tool, agent]

    _progress("half-open probes ...")
    probe_threads = Metric(
        f"half-open: {CALLERS} threads into a still-dead 50 ms function, callers reaching it",
        "calls",
        "= 1",
        lambda v: v == 1,
        digits=0,
        ratio=False,
    )
    probe_tasks = Metric(
        f"half-open: {CALLERS} asyncio tasks into a still-dead 50 ms coroutine, reaching it",
        "calls",
        "= 1",
        lambda v: v == 1,
        digits=0,
        ratio=False,
    )
    for subject in subjects:
        is_ours = subject in ours.SUBJECTS
        probe_threads.add(_label(subject, "sync"), measure.half_open_threads(subject), is_ours)
        probe_tasks.add(_label(subject, "async"), measure.half_open_tasks(loop, subject), is_ours)
    metrics += [probe_threads, probe_tasks]

    _progress("closed path under concurrency ...")
    wall_threads = Metric(
        f"closed: {CALLERS} concurrent healthy 50 ms calls, threads, wall",
        "s",
        "≤ 0.10",
        lambda v: v <= 0.10,
        digits=3,
    )
    wall_tasks = Metric(
        f"closed: {CALLERS} concurrent healthy 50 ms calls, tasks, wall",
        "s",
        "≤ 0.10",
        lambda v: v <= 0.10,
        digits=3,
    )
    for subject in subjects:
        is_ours = subject in ours.SUBJECTS
        wall_threads.add(_label(subject, "sync"), measure.closed_threads(subject), is_ours)
        wall_tasks.add(_label(subject, "async"), measure.closed_tasks(loop, subject), is_ours)
    metrics += [wall_threads, wall_tasks]

    _progress("memory per breaker ...")
    memory = Metric(
        "memory per breaker core object, key included (10,000 breakers)",
        "B",
        "≤ 400",
        lambda v: v <= 400,
        digits=0,
    )
    for subject in subjects:
        factory = subject.memory_factory
        if factory is None:
            continue
        label = "ours (b) Engine, per key" if subject is ours.EngineSubject else subject.label
        memory.add(label, measure.bytes_per_breaker(factory()), subject in ours.SUBJECTS)
    metrics.append(memory)
    loop.close()
    return metrics, baseline


def run_durability() -> str:
    """The Engine without and with a state dir, side by side, so durability's cost shows."""
    import tempfile

    _progress("state dir cost ...")
    rows: dict[str, list[float]] = {"counted": [], "trip": [], "denial": []}
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-state-") as tmp:
        for state_dir in (None, f"{tmp}/state"):
            subject = ours.Durability(state_dir)
            rows["counted"].append(subject.counted_failure() * US)
            rows["trip"].append(subject.trip_and_reset() * US)
            rows["denial"].append(subject.denial() * US)
            problems += subject.close()
    titles = {
        "counted": "one counted failure or success, no trip",
        "trip": "one trip (3 counted failures) and its reset",
        "denial": "one refusal in a flood (call.denied)",
    }
    lines = [
        "state dir cost: ours (b) Engine without / with a state dir (µs per operation)",
        f"  {'operation':44}  {'without':>9}  {'with':>9}  {'ratio':>7}",
    ]
    for name, (without, with_dir) in rows.items():
        lines.append(
            f"  {titles[name]:44}  {without:9.2f}  {with_dir:9.2f}  {with_dir / without:6.2f}x"
        )
    lines += [f"  problems: {problem}" for problem in problems] or ["  problems: none"]
    return "\n".join(lines)


def render(metrics: list[Metric], baseline: dict[str, float], seconds: float) -> str:
    head = ("implementation", "value", "vs best peer", "target", "met")
    widths = (32, 10, 12, 8, 4)
    lines = [
        f"breakerdeck bench · CPython {platform.python_version()} · {platform.machine()} · "
        f"medians of {measure.REPEAT} timeit repeats",
        f"bare call: sync {baseline['sync']:.3f} µs, async (awaited) {baseline['async']:.3f} µs"
        " (each overhead: median of guarded minus bare, run back to back)",
        "",
        "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)),
        "  ".join("-" * w for w in widths),
    ]
    for metric in metrics:
        lines.append(f"{metric.title} ({metric.unit})")
        peer_values = [v for _, v, o in metric.rows if not o and v is not None]
        best = min(peer_values) if peer_values else None
        for label, value, is_ours in metric.rows:
            shown = "n/a" if value is None else f"{value:.{metric.digits}f}"
            if metric.ratio and value is not None and best:
                ratio = f"{value / best:.2f}x"
            else:
                ratio = "-"
            target = metric.target if is_ours else ""
            met = ("yes" if metric.met(value) else "NO") if is_ours and value is not None else ""
            cells = (f"  {label}", shown, ratio, target, met)
            lines.append(
                "  ".join(
                    c.ljust(w) if i in (0, 3, 4) else c.rjust(w)
                    for i, (c, w) in enumerate(zip(cells, widths, strict=True))
                ).rstrip()
            )
        lines.append("")
    lines.append(f"run took {seconds:.1f} s")
    return "\n".join(lines)


def main() -> None:
    warnings.simplefilter("ignore", DeprecationWarning)  # aiobreaker's datetime.utcnow()
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    sections = (
        "peers",
        "shell",
        "calls",
        "telemetry",
        "durability",
        "feed",
        "console",
        "gateway",
        "shared",
        "mcp",
    )
    if only is not None and only not in sections:
        sys.exit(f"usage: bench/run.py [--only {'|'.join(sections)}]")
    if only in (None, "shell"):
        from bench import shell  # issue 18's targets, each beside its figure

        _progress("the shell against its targets ...")
        print(shell.render(shell.run()), flush=True)
        if only is None:
            print()
    if only in (None, "calls"):
        from bench import calls  # the same paths' calls per call: deterministic, unlike time

        print(calls.render(calls.rows()), flush=True)
        if only is None:
            print()
    if only in (None, "telemetry"):
        from bench import telemetry  # issue 20: the closed call, telemetry off and spans on

        _progress("telemetry off and on ...")
        print(telemetry.render(telemetry.run()), flush=True)
        if only is None:
            print()
    if only == "durability":
        print(run_durability())
    if only in (None, "peers"):
        start = time.perf_counter()
        metrics, baseline = run()
        print(render(metrics, baseline, time.perf_counter() - start))
        print()
        print(run_durability(), flush=True)
    if only in (None, "feed"):
        from bench import feed  # the live feed under load (docs/bench.md, "The live feed")

        if only is None:
            print()
        feed.main()
    if only in (None, "gateway"):
        from bench import gateway  # issue 11's targets (docs/gateway.md, "Speed")

        if only is None:
            print()
        print(gateway.render(gateway.run()), flush=True)
    if only in (None, "shared"):
        from bench import shared  # issue 13's targets (docs/bench.md, "Replicas (shared store)")

        if only is None:
            print()
        print(shared.section(), flush=True)
    if only in (None, "mcp"):
        # `breakerdeck mcp` (docs/mcp.md); a child process, as bench/mcp.py's name shadows the
        # SDK's `mcp` package when run from here.
        if only is None:
            print(flush=True)
        subprocess.run(
            [sys.executable, str(Path(__file__).resolve().parent / "mcp.py")],
            check=False,
            timeout=900,
        )
    if only in (None, "console"):
        # The console at 10,000 breakers (docs/bench.md, "The console"): about 30 s, bounded.
        if only is None:
            print(flush=True)
        here = Path(__file__).resolve().parent
        subprocess.run([sys.executable, str(here / "console.py")], check=False, timeout=180)
        # Bytes the demo writes to a real pty at 80x24 (docs/console.md).
        subprocess.run([sys.executable, str(here / "console_bytes.py")], check=False, timeout=120)


if __name__ == "__main__":
    main()
