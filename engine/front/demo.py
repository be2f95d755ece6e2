"""`breakerdeck gateway --demo`: the whole path on one machine, agent → gateway → platform.

The loopback fixture server plays the platforms (a scenario's faults change them over time),
a generated config puts the gateway in front of it, and the roster's simulated agents call the
gateway over real HTTP with their own bearer tokens. The feed is served as `serve` serves it
(same default port and state dir), so `breakerdeck watch` shows the gateway's breakers.

Layering: this module needs the fixtures (platforms, roster, scenarios), which `engine` must
not import. It imports them only inside `run_demo`, and belongs in `fixtures/` (or `console/`)
once those folders' owners take it; nothing else in `engine.front` refers to it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import secrets
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from breakerdeck.engine import statedir
from breakerdeck.engine.errors import StateDirError
from breakerdeck.engine.front.config import ConfigError, load
from breakerdeck.engine.front.server import Options, StartError, run, say, serve

if TYPE_CHECKING:
    from breakerdeck.fixtures.platform import FakePlatform
    from breakerdeck.fixtures.scenario import Scenario, Step
    from breakerdeck.fixtures.simulation import SimAgent

DEMO_FEED = "127.0.0.1:8765"
DEMO_LISTEN = "127.0.0.1:8080"
EXIT_START = 2


def default_state_dir() -> Path:
    """Where `serve` keeps its tokens, so `watch` and `status` find the demo's too."""
    base = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(base) / "breakerdeck"


def write_demo_config(
    directory: Path, platforms: dict[str, str], agents: tuple[SimAgent, ...]
) -> tuple[Path, dict[str, str]]:
    """A config for the roster in `directory/gateway-demo/`: one token file per agent and one
    credential file per grant (all 0600). Returns the file and each agent's bearer token."""
    home = directory / "gateway-demo"
    home.mkdir(mode=0o700, exist_ok=True)
    tokens: dict[str, str] = {}
    lines = ["[gateway]"]
    for name, url in sorted(platforms.items()):
        lines += [f"[platforms.{name}]", f"base_url = {json.dumps(url)}"]
    for agent in agents:
        token = tokens.setdefault(agent.name, secrets.token_urlsafe(24))
        statedir.write_private(home / f"{agent.name}.token", token + "\n")
        statedir.write_private(
            home / f"{agent.name}-{agent.platform}.credential", f"{agent.credential}-secret\n"
        )
        lines += [
            f"[agents.{agent.name}]",
            f'token_file = "{agent.name}.token"',
            f"[agents.{agent.name}.credentials]",
            f'{agent.platform} = {{ file = "{agent.name}-{agent.platform}.credential" }}',
        ]
    path = home / "gateway.toml"
    path.write_text("\n".join(lines) + "\n")
    return path, tokens


class DemoAgents:
    """The roster calling the gateway over HTTP, each every `interval` simulated seconds."""

    def __init__(
        self, url: str, agents: tuple[SimAgent, ...], tokens: dict[str, str], speed: float
    ) -> None:
        self.url = url
        self.agents = agents
        self.tokens = tokens
        self.speed = speed
        self.calls = 0

    async def run(self, interval: float, seed: int = 7) -> None:
        rng = random.Random(seed)
        async with httpx.AsyncClient(timeout=None) as client:
            streams = [random.Random(rng.random()) for _ in self.agents]
            await asyncio.gather(
                *(
                    self._agent(client, agent, stream, interval)
                    for agent, stream in zip(self.agents, streams, strict=True)
                )
            )

    async def _agent(
        self, client: httpx.AsyncClient, agent: SimAgent, rng: random.Random, interval: float
    ) -> None:
        await asyncio.sleep(rng.uniform(0, interval) / self.speed)
        headers = {"Authorization": f"Bearer {self.tokens[agent.name]}"}
        while True:
            with contextlib.suppress(httpx.HTTPError):
                await client.post(
                    f"{self.url}/p/{agent.platform}/{agent.tool}",
                    headers=headers,
                    json={"query": f"{agent.tool} for {agent.name}"},
                )
                self.calls += 1
            await asyncio.sleep(interval * rng.uniform(0.75, 1.25) / self.speed)


def schedule_steps(
    scenario: Scenario, fakes: dict[str, FakePlatform], speed: float, start: float = 0.0
) -> None:
    """The scenario's timeline on the running loop, in real seconds at `speed`."""
    loop = asyncio.get_running_loop()
    for step in scenario.steps_for("agent"):
        loop.call_later((step.at - start) / speed, _apply, step, fakes)
    if scenario.repeat_seconds is not None:
        repeat = scenario.repeat_seconds
        loop.call_later(repeat / speed, schedule_steps, scenario, fakes, speed)


def _apply(step: Step, fakes: dict[str, FakePlatform]) -> None:
    platform = fakes[step.platform]
    if step.credential == "revoke":
        platform.revoke_credential()
    elif step.credential == "fix":
        platform.fix_credential()
    fault = step.parsed_fault()
    if fault is not None:
        platform.set_fault(fault, requests=step.requests)


def run_demo(args: argparse.Namespace) -> int:
    from breakerdeck.fixtures import scenario as scenarios
    from breakerdeck.fixtures.platform import FakePlatform
    from breakerdeck.fixtures.server import PlatformServer
    from breakerdeck.fixtures.simulation import DEFAULT_SCENARIO, ROSTER

    try:
        scenario = scenarios.load(getattr(args, "scenario", None) or DEFAULT_SCENARIO)
        state_dir = statedir.prepare(Path(args.state_dir or default_state_dir()).expanduser())
    except (scenarios.ScenarioError, StateDirError) as error:
        say(str(error))
        return EXIT_START
    fakes: dict[str, Any] = {name: FakePlatform(name) for name in {a.platform for a in ROSTER}}
    with PlatformServer(fakes, hang_seconds=60) as server:
        urls = {name: server.url(name) for name in fakes}
        path, tokens = write_demo_config(state_dir, urls, ROSTER)
        try:
            config, digests = load(path)
        except ConfigError as error:
            say(str(error))
            return EXIT_START
        options = Options(
            config_path=path,
            config=config,
            digests=digests,
            listen=args.listen or DEMO_LISTEN,
            state_dir=state_dir,
            feed_listen=args.feed_listen or DEMO_FEED,
            speed=args.speed,
        )
        say(f"gateway demo: {scenario.name}, {len(ROSTER)} agents, config {path}")
        say(f"watch it: breakerdeck watch ws://{options.feed_listen}")
        try:
            sock = _bind(options.listen)
            host, port = sock.getsockname()[:2]
            agents = DemoAgents(f"http://{host}:{port}", ROSTER, tokens, args.speed)
            run(_demo(options, sock, agents, scenario, fakes))
        except (StartError, StateDirError, OSError) as error:
            say(f"gateway demo: {error}")
            return EXIT_START
        except KeyboardInterrupt:
            pass
    say("gateway demo stopped")
    return 0


def _bind(address: str) -> socket.socket:
    host, _, port = address.rpartition(":")
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), int(port)))
    return sock


async def _demo(
    options: Options,
    sock: socket.socket,
    agents: DemoAgents,
    scenario: Scenario,
    fakes: dict[str, FakePlatform],
) -> None:
    """The gateway until a signal; the agents and the scenario beside it."""
    gateway = asyncio.create_task(serve(options, sock))
    await asyncio.sleep(0.5)
    schedule_steps(scenario, fakes, options.speed)
    callers = asyncio.create_task(agents.run(scenario.call_interval_seconds))
    try:
        await gateway
    finally:
        callers.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await callers
