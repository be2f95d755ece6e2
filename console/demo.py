"""`breakerdeck demo`: the console over an in-process engine, simulated agents and fake platforms.

Kept small on purpose: build the simulation, wrap it as a source and as fault controls, run the
app, stop the simulation.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import sys
import tempfile
from typing import TYPE_CHECKING

from breakerdeck.console.source import InProcessSource

if TYPE_CHECKING:
    from breakerdeck.fixtures.simulation import Simulation

#: A 300 s cooldown takes about a minute at this speed.
DEFAULT_SPEED = 5.0

#: What `d` does to a platform: the connection is refused, a counted upstream failure under
#: both policies, and instant, so trips come quickly.
DOWN_FAULT = "refused"


class SimulationControls:
    """The console's fault keys on a `fixtures.simulation.Simulation` (thread-safe calls)."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.platforms: list[str] = list(sim.platforms)

    def status(self) -> dict[str, str]:
        shown: dict[str, str] = {}
        for platform, fake in self.sim.fakes.items():
            word = "ok" if fake.fault.label == "ok" else f"DOWN ({fake.fault.label})"
            if not fake.credential_valid:
                word = "CRED REVOKED" if word == "ok" else f"{word}, CRED REVOKED"
            shown[platform] = word
        return shown

    def platform_of(self, key: str) -> str | None:
        return self.sim.platform_of(key)

    def take_down(self, platform: str) -> None:
        self.sim.inject(platform, DOWN_FAULT)

    def bring_back(self, platform: str) -> None:
        self.sim.heal(platform)

    def revoke(self, platform: str) -> None:
        self.sim.revoke_credential(platform)

    def fix(self, platform: str) -> None:
        self.sim.fix_credential(platform)


def run_demo(args: argparse.Namespace) -> int:
    from breakerdeck.console.app import BreakerdeckApp
    from breakerdeck.engine.page import command_hook
    from breakerdeck.fixtures.simulation import DEFAULT_SCENARIO, Simulation

    speed = args.speed or DEFAULT_SPEED
    operator = args.operator or getpass.getuser()
    scenario = args.scenario or DEFAULT_SCENARIO
    with contextlib.ExitStack() as stack:
        # The detail screen reads the audit log, so the demo always has one.
        state_dir = args.state_dir or stack.enter_context(
            tempfile.TemporaryDirectory(prefix="breakerdeck-demo-")
        )
        try:
            sim = Simulation.build(
                scenario,
                policy=args.policy,
                seed=args.seed,
                speed=speed,
                state_dir=state_dir,
                page_hook=command_hook(args.on_page) if args.on_page else None,
            )
        except (ValueError, OSError) as error:
            print(f"breakerdeck: {error}", file=sys.stderr)
            return 2
        for problem in sim.engine.problems:
            print(f"breakerdeck: {problem}", file=sys.stderr)
        controls = SimulationControls(sim)
        source = InProcessSource(sim.engine, label=f"demo {scenario} · {args.policy}", speed=speed)
        app = BreakerdeckApp(
            source, operator=operator, controls=controls, platform_of=controls.platform_of
        )
        sim.start_thread()
        try:
            app.run()
        finally:
            sim.stop()
    return app.return_code or 0
