"""`breakerdeck demo --headless` and `breakerdeck scenarios`: the simulation without a screen.

The trace (docs/trace.md) is a public format: one compact JSON object per line on the events
output and nothing else; every human message goes to standard error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from pathlib import Path
from typing import IO

from breakerdeck.engine.engine import read_mark
from breakerdeck.engine.events import Event, record
from breakerdeck.engine.page import command_hook
from breakerdeck.fixtures import scenario as scenarios
from breakerdeck.fixtures.simulation import DEFAULT_SCENARIO, FIXED_EPOCH, Simulation


def list_scenarios(out: IO[str]) -> int:
    for name in scenarios.names():
        loaded = scenarios.load(name)
        policies = ", ".join(loaded.policies) or "none: nothing trips"
        out.write(f"{name}  [{policies}]\n")
        out.write(f"    {' '.join(loaded.description.split())}\n")
    return 0


def run_headless(args: argparse.Namespace) -> int:
    try:
        scenario = scenarios.load(args.scenario or DEFAULT_SCENARIO)
    except scenarios.ScenarioError as error:
        print(f"breakerdeck: {error}", file=sys.stderr)
        return 2
    with contextlib.ExitStack() as stack:
        state_dir = args.state_dir or stack.enter_context(
            tempfile.TemporaryDirectory(prefix="breakerdeck-")
        )
        out = _open_events(args.events, stack)
        simulation = Simulation(
            scenario,
            policy=args.policy,
            seed=args.seed,
            speed=args.speed,
            state_dir=state_dir,
            page_hook=command_hook(args.on_page) if args.on_page else None,
            epoch=_start_wall(Path(state_dir)),
        )
        for problem in simulation.engine.problems:
            print(f"breakerdeck: {problem}", file=sys.stderr)
        epoch = simulation.engine.epoch
        simulation.engine.subscribe(lambda event: _write(out, event, epoch))
        print(
            f"breakerdeck: {scenario.name} under the {args.policy} policy, seed {args.seed}, "
            f"{args.duration:g} simulated seconds",
            file=sys.stderr,
        )
        simulation.run_headless(args.duration)
        out.flush()
    return 0


def _write(out: IO[str], event: Event, epoch: float) -> None:
    out.write(json.dumps(record(event, epoch), separators=(",", ":")))
    out.write("\n")


def _open_events(path: str, stack: contextlib.ExitStack) -> IO[str]:
    if path == "-":
        return sys.stdout
    return stack.enter_context(open(path, "w", encoding="utf-8"))


def _start_wall(state_dir: Path) -> float:
    """A run on an existing state directory continues from the newest time it recorded."""
    from breakerdeck.engine.audit import AuditLog
    from breakerdeck.engine.store import VerdictStore

    newest = [FIXED_EPOCH, read_mark(state_dir).wall or FIXED_EPOCH]
    audit_path, store_path = state_dir / "audit.sqlite3", state_dir / "verdicts.sqlite3"
    if audit_path.exists():
        with AuditLog(audit_path, retention_seconds=float("inf")) as audit:
            newest.append(audit.newest_wall() or FIXED_EPOCH)
    if store_path.exists():
        with VerdictStore(store_path) as store:
            newest.append(store.newest_wall() or FIXED_EPOCH)
    return max(newest)
