"""`breakerdeck demo`: the console over an in-process engine, simulated agents and fake platforms.

Kept small on purpose: build the simulation, wrap it as a source and as fault controls, run the
app, stop the simulation.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from breakerdeck.console.output import say
from breakerdeck.console.source import REVOKED, InProcessSource
from breakerdeck.engine.errors import StateDirError
from breakerdeck.engine.storage import statedir

if TYPE_CHECKING:
    from breakerdeck.fixtures.simulation import Simulation

#: A 300 s cooldown takes about a minute at this speed.
DEFAULT_SPEED = 5.0

#: What `d` does to a platform: the connection is refused, a counted upstream failure under
#: both policies, and instant, so trips come quickly.
DOWN_FAULT = "refused"

#: The demo could not start (the scenario, the state dir): the message says why.
EXIT_START = 2


def fault_word(label: str) -> str:
    """What a platform's fault is, in the status line's words: a 4xx is the callers' mistake
    and a 429 a limit, never "DOWN" (`caller-bugs` read as an outage)."""
    if label == "ok":
        return "ok"
    if label == "http_429":
        return f"rate limiting ({label})"
    if label.startswith("http_4"):
        return f"caller errors ({label})"
    if label == "malformed":
        return f"bad output ({label})"
    return f"DOWN ({label})"


class SimulationControls:
    """The console's fault keys on a `fixtures.simulation.Simulation` (thread-safe calls)."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.platforms: list[str] = list(sim.platforms)

    def status(self) -> dict[str, str]:
        shown: dict[str, str] = {}
        for platform, fake in self.sim.fakes.items():
            word = fault_word(fake.fault.label)
            if not fake.credential_valid:
                word = REVOKED if word == "ok" else f"{word}, {REVOKED}"
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
    from breakerdeck.console.contexts import views_for
    from breakerdeck.console.headless import scenario_policy
    from breakerdeck.engine.page import command_hook
    from breakerdeck.fixtures import scenario as scenarios
    from breakerdeck.fixtures.simulation import DEFAULT_SCENARIO, Simulation

    views, start = views_for(args.view)
    speed = args.speed or DEFAULT_SPEED
    operator = args.operator or getpass.getuser()
    scenario = args.scenario or DEFAULT_SCENARIO
    with contextlib.ExitStack() as stack:
        try:
            policy, warning = scenario_policy(scenarios.load(scenario), args.policy)
            if warning:
                say(warning)
            # The detail screen reads the audit log, so the demo always has one.
            state_dir = (
                statedir.prepare(Path(args.state_dir).expanduser())
                if args.state_dir
                else stack.enter_context(tempfile.TemporaryDirectory(prefix="breakerdeck-demo-"))
            )
            sim = Simulation.build(
                scenario,
                policy=policy,
                seed=args.seed,
                speed=speed,
                state_dir=state_dir,
                page_hook=command_hook(args.on_page) if args.on_page else None,
            )
        except (ValueError, OSError, StateDirError) as error:  # ScenarioError is a ValueError
            say(str(error))
            return EXIT_START
        for problem in sim.engine.problems:
            say(problem)
        controls = SimulationControls(sim)
        label = f"demo {scenario} · {policy}"
        source = InProcessSource(sim.engine, label=label, speed=speed)
        app = BreakerdeckApp(
            source,
            operator=operator,
            controls=controls,
            platform_of=controls.platform_of,
            views=views,
            filter_text=start,
            export_dir=args.export_dir,
        )
        sim.start_thread()
        try:
            app.run()
        finally:
            sim.stop()
    return app.return_code or 0
