"""`breakerdeck demo --headless` and `breakerdeck scenarios`: the simulation without a screen.

The trace (docs/trace.md) is a public format: one compact JSON object per line on the events
output and nothing else; every human message goes to standard error.
"""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import IO

from breakerdeck.console.output import EXIT_IO, Output, say
from breakerdeck.engine.engine import read_mark
from breakerdeck.engine.errors import StateDirError
from breakerdeck.engine.page import command_hook
from breakerdeck.engine.storage import statedir
from breakerdeck.engine.storage.tracefile import trace_lines
from breakerdeck.fixtures import scenario as scenarios
from breakerdeck.fixtures.simulation import DEFAULT_SCENARIO, FIXED_EPOCH, Simulation

#: The run could not start (the scenario, the state dir): the message says why.
EXIT_START = 2


def scenario_policy(scenario: scenarios.Scenario, asked: str | None) -> tuple[str, str | None]:
    """The policy a scenario runs under, and a warning when the one asked for shows nothing.

    DESIGN (Demo mode): a scenario runs under its own policy unless `--policy` is given; its
    own is the first it names (`live-demo` and `vendor-outage` name `agent` first), and `agent`
    for one that names none (`caller-bugs`: nothing trips under either)."""
    own, name = scenario.policies, scenario.name
    if asked is None:
        return (own[0] if own else "agent"), None
    if own and asked not in own:
        named = ", ".join(own)
        return asked, (
            f"{name} trips only under {named}; under {asked} its breakers stay closed "
            f"(drop --policy to run it under {own[0]})"
        )
    return asked, None


def list_scenarios(out: IO[str]) -> int:
    output = Output(out)
    for name in scenarios.names():
        loaded = scenarios.load(name)
        policies = ", ".join(loaded.policies) or "none: nothing trips"
        description = " ".join(loaded.description.split())
        if not output.write(f"{name}  [{policies}]\n    {description}\n"):
            break
    output.close()
    return _finish(output, 0)


def run_headless(args: argparse.Namespace) -> int:
    with contextlib.ExitStack() as stack:
        try:
            scenario = scenarios.load(args.scenario or DEFAULT_SCENARIO)
            policy, warning = scenario_policy(scenario, args.policy)
            if warning:
                say(warning)
            state_dir = _state_dir(args.state_dir, stack)
            simulation = Simulation(
                scenario,
                policy=policy,
                seed=args.seed,
                speed=args.speed,
                state_dir=state_dir,
                page_hook=command_hook(args.on_page) if args.on_page else None,
                epoch=_start_wall(state_dir),
            )
        except (scenarios.ScenarioError, StateDirError) as error:
            say(str(error))
            return EXIT_START
        try:
            out = _open_events(args.events, stack)
        except OSError as error:
            simulation.close()
            say(f"cannot write the trace to {args.events}: {error.strerror or error}")
            return EXIT_IO
        for problem in simulation.engine.problems:
            say(problem)
        output = Output(out)
        simulation.engine.subscribe(
            trace_lines(output.write, simulation.engine.epoch, simulation.halt)
        )
        say(
            f"{scenario.name} under the {policy} policy, seed {args.seed}, "
            f"{args.duration:g} simulated seconds"
        )
        simulation.run_headless(args.duration)
        output.close()
    return _finish(output, 0)


def _finish(output: Output, verdict: int) -> int:
    problem = output.problem()
    if problem:
        say(problem)
    return output.exit_status(verdict)


def _state_dir(given: str | None, stack: contextlib.ExitStack) -> Path:
    """The state dir asked for, checked (ours, private, a directory), or a temporary one."""
    if given is None:
        return Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="breakerdeck-")))
    return statedir.prepare(Path(given).expanduser())


def _open_events(path: str, stack: contextlib.ExitStack) -> IO[str]:
    if path == "-":
        return sys.stdout
    return stack.enter_context(open(path, "w", encoding="utf-8"))


def _start_wall(state_dir: Path) -> float:
    """A run on an existing state directory continues from the newest time it recorded."""
    from breakerdeck.engine.storage.audit import AuditLog
    from breakerdeck.engine.storage.store import VerdictStore

    newest = [FIXED_EPOCH, read_mark(state_dir).wall or FIXED_EPOCH]
    audit_path, store_path = state_dir / "audit.sqlite3", state_dir / "verdicts.sqlite3"
    # A damaged file is the engine's to move aside when it opens it; the start time does
    # without what it held.
    if audit_path.exists():
        with (
            contextlib.suppress(sqlite3.DatabaseError),
            AuditLog(audit_path, retention_seconds=float("inf")) as audit,
        ):
            newest.append(audit.newest_wall() or FIXED_EPOCH)
    if store_path.exists():
        with contextlib.suppress(sqlite3.DatabaseError), VerdictStore(store_path) as store:
            newest.append(store.newest_wall() or FIXED_EPOCH)
    return max(newest)
