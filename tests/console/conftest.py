"""Console tests: a real engine on a manual clock, driven through the real gateway and harness
over counting fake platforms. Normal asyncio loops (no simulated-time loop here)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import httpx
import pytest
import pytest_asyncio
from textual.pilot import Pilot
from textual.screen import Screen

from breakerdeck.console import cli
from breakerdeck.console.app import BreakerdeckApp
from breakerdeck.console.source import InProcessSource
from breakerdeck.console.web_role import ACTOR_VARIABLE, ROLE_VARIABLE
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.gateway import Gateway
from breakerdeck.engine.harness import Harness, Tool
from breakerdeck.engine.policy import AgentPolicy, ToolPolicy
from breakerdeck.fixtures.faults import Fault, FaultKind
from breakerdeck.fixtures.platform import FakePlatform, FakeVault
from tests.console.web_server import (
    CAPTURE_TERMINAL,
    CHROMIUM,
    CHROMIUM_ARGS,
    WebServer,
    chromium_missing,
)

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext

ScreenT = TypeVar("ScreenT", bound=Screen[object])

PLATFORMS = ("payments", "crm", "email", "search")
OPERATOR = "oncall-ann"


#: The actor a `breakerdeck web` console's writes carry (`as_web`).
WEB_ACTOR = "web:203.0.113.7"


@pytest.fixture
def as_web(monkeypatch):
    """Run the console as `breakerdeck web` starts it, in the given role."""

    def role(name: str) -> None:
        monkeypatch.setenv(ROLE_VARIABLE, name)
        monkeypatch.setenv(ACTOR_VARIABLE, WEB_ACTOR)

    return role


@pytest.fixture(autouse=True)
def config_home(tmp_path, monkeypatch):
    """Every console test has a config dir of its own: the consoles read `views.toml` (and
    `watch --context` `contexts.toml`) from it, never from the user's."""
    home = tmp_path / "xdg-config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home / "breakerdeck"


@dataclass
class AgentWorld:
    """Agents calling platforms through the gateway (`agent` policy), on a manual clock."""

    engine: Engine
    clock: ManualClock
    gateway: Gateway
    platforms: dict[str, FakePlatform]
    vault: FakeVault = field(default_factory=FakeVault)

    async def call(self, agent: str, platform: str, times: int = 1) -> list[int]:
        statuses = []
        for _ in range(times):
            response = await self.gateway.call(agent, platform, path="/work")
            statuses.append(response.status)
        return statuses

    async def call_once(self, *agents: str, platform: str = "crm") -> None:
        """One call each: a closed card per agent."""
        for agent in agents:
            await self.call(agent, platform)

    async def trip_upstream(self, agent: str, platform: str = "payments") -> None:
        self.platforms[platform].set_fault(Fault(FaultKind.REFUSED))
        await self.call(agent, platform, 5)
        assert self.engine.view(agent).state == "open"

    async def trip_auth(self, agent: str, platform: str = "crm") -> None:
        self.platforms[platform].revoke_credential()
        await self.call(agent, platform, 3)
        assert self.engine.view(agent).state == "open"

    def heal(self, platform: str) -> None:
        self.platforms[platform].set_fault(Fault(FaultKind.OK))
        self.platforms[platform].fix_credential()


@pytest.fixture
def agent_world(tmp_path) -> AgentWorld:
    clock = ManualClock(now=12 * 3600.0)  # reads 12:00:00 on screen
    engine = Engine(AgentPolicy(), clock=clock, state_dir=tmp_path / "state")
    platforms = {name: FakePlatform(name) for name in PLATFORMS}
    clients = {
        name: httpx.AsyncClient(transport=fake, base_url=f"https://{name}.test")
        for name, fake in platforms.items()
    }
    vault = FakeVault()
    world = AgentWorld(engine, clock, Gateway(engine, clients, vault), platforms, vault)
    yield world
    engine.close()


@dataclass
class ToolWorld:
    engine: Engine
    clock: ManualClock
    harness: Harness
    platforms: dict[str, FakePlatform]


@pytest.fixture
def tool_world(tmp_path) -> ToolWorld:
    clock = ManualClock(now=12 * 3600.0)
    engine = Engine(ToolPolicy(), clock=clock, state_dir=tmp_path / "state")
    platforms = {name: FakePlatform(name) for name in PLATFORMS}
    clients = {
        name: httpx.AsyncClient(transport=fake, base_url=f"https://{name}.test")
        for name, fake in platforms.items()
    }
    harness = Harness(engine, clients)
    # No backoff between a call's two attempts: on this real loop it is a real second's sleep
    # per failed call, and what the console shows of a call does not depend on it.
    harness.register(Tool("charge", backend="payments", path="/charges", backoff_seconds=0))
    harness.register(Tool("lookup", backend="crm", path="/lookup", backoff_seconds=0))
    yield ToolWorld(engine, clock, harness, platforms)
    engine.close()


@pytest.fixture
def worlds(tmp_path):
    """A factory of engines (agents over fake platforms), closed at the end."""
    made: list[AgentWorld] = []

    def make(name: str) -> AgentWorld:
        clock = ManualClock(now=12 * 3600.0)
        engine = Engine(AgentPolicy(), clock=clock, state_dir=tmp_path / name)
        platforms = {n: FakePlatform(n) for n in ("payments", "crm")}
        clients = {
            n: httpx.AsyncClient(transport=fake, base_url=f"https://{n}.test")
            for n, fake in platforms.items()
        }
        vault = FakeVault()
        world = AgentWorld(engine, clock, Gateway(engine, clients, vault), platforms, vault)
        made.append(world)
        return world

    yield make
    for world in made:
        world.engine.close()


def make_app(engine: Engine, **kwargs) -> BreakerdeckApp:
    source = InProcessSource(engine, label="test", speed=kwargs.pop("speed", None))
    return BreakerdeckApp(
        source, operator=OPERATOR, tick_seconds=None, min_repaint_seconds=0, **kwargs
    )


@asynccontextmanager
async def running(
    engine: Engine, size: tuple[int, int] = (80, 24), **kwargs
) -> AsyncIterator[tuple[BreakerdeckApp, Pilot]]:
    """The console on `engine` (`make_app`'s `kwargs`) running at `size`, its first screen
    settled."""
    app = make_app(engine, **kwargs)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        yield app, pilot


async def settle(pilot, rounds: int = 4) -> None:
    """Let the source reader and the message queue catch up with the engine."""
    for _ in range(rounds):
        await pilot.pause()


async def press(pilot, *keys: str) -> None:
    """Press `keys`, then let what they set off settle."""
    await pilot.press(*keys)
    await settle(pilot)


async def open_screen(pilot, key: str, kind: type[ScreenT]) -> ScreenT:
    """Press `key` and let it settle: the screen it opened, which must be a `kind`."""
    await press(pilot, key)
    screen = pilot.app.screen
    assert isinstance(screen, kind), screen
    return screen


async def filter_by(pilot, text: str) -> None:
    """Type `text` after `/` and enter it, as a user filters the dashboard."""
    await press(pilot, "slash", *text, "enter")


@pytest.fixture
def cli_run(capsys):
    """`main(argv)` -> (exit status, standard error); a usage error's SystemExit is its status."""

    def run(argv: list[str]) -> tuple[int, str]:
        try:
            code = cli.main(argv)
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else 1
        err = capsys.readouterr().err
        assert "Traceback" not in err
        return code, err

    return run


# -- the browser tests (tests/console/test_web_browser.py): one server and one chromium for
# the session, in the one xdist group whose worker runs them all.


@pytest.fixture(scope="session")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    server = WebServer(tmp_path_factory.mktemp("web"), ["demo", "--speed", "20"])
    yield server.start()
    server.stop()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def chromium(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Browser]:
    """On the session's event loop, which the browser tests run on (`BROWSER_LOOP`): Playwright's
    objects belong to the loop that made them, and its sync API would hold a loop running in the
    worker's thread for the session, which every later asyncio test of that worker trips on."""
    from playwright.async_api import async_playwright  # only the browser tests pay its import

    missing = chromium_missing()
    if missing:
        pytest.fail(missing, pytrace=False)
    async with async_playwright() as playwright:
        profile = await playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=str(CHROMIUM),
            args=CHROMIUM_ARGS,
        )
        assert profile.browser is not None
        yield profile.browser
        await profile.close()


@pytest_asyncio.fixture(loop_scope="session")
async def browser_context(chromium: Browser) -> AsyncIterator[BrowserContext]:
    """A context of its own per test: no cookie from another test."""
    context = await chromium.new_context(viewport={"width": 1280, "height": 800})
    await context.add_init_script(CAPTURE_TERMINAL)
    yield context
    await context.close()
