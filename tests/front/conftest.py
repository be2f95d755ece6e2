"""A real gateway for each test: uvicorn on a free loopback port in the test's loop, agents as
real HTTP clients, platforms behind real sockets (the fixture server or a recording one).

The engine runs on a `ManualClock` (cooldowns move by hand, never slept through) and a policy
deadline long enough that a loaded machine never turns an answer into a timeout; a test of a
hang, a stall or a hanging vault passes `deadline=SHORT_DEADLINE`, so it costs half a second.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.front.drain import DrainingServer
from breakerdeck.engine.front.gateway.app import GatewayApp
from breakerdeck.engine.front.gateway.config import load
from breakerdeck.engine.front.gateway.options import Options
from breakerdeck.engine.front.gateway.server import uvicorn_config
from breakerdeck.engine.policy import AgentPolicy
from breakerdeck.engine.replicas.replica import Store
from breakerdeck.engine.state import State
from tests.waiting import BOUND_SECONDS

DEADLINE = 10.0
SHORT_DEADLINE = 0.5


def counted(engine: Engine) -> list[str]:
    """The keys whose breaker has counted or refused anything. Every key a door's configuration
    names has a breaker from the start (an operator can hold it before its first call), so
    `Engine.keys()` no longer says whether a call reached one."""
    refused = {key for key, denied, _ in engine.tallies() if denied}
    return [
        view.key
        for view in engine.views()
        if view.key in refused
        or view.count
        or view.last_failure_at is not None
        or view.state is not State.CLOSED
    ]


def token(agent: str) -> str:
    return f"token-of-{agent}"


def auth(agent: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(agent)}"}


def free_socket() -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def write_config(
    directory: Path,
    platforms: dict[str, str],
    grants: dict[str, dict[str, str]],
    *,
    gateway: str = "",
    platform_extra: str = "",
) -> Path:
    """A config file: each grant maps a platform to a credential entry's TOML (inline table)."""
    lines = ["[gateway]", gateway]
    for name, url in platforms.items():
        lines += [f"[platforms.{name}]", f'base_url = "{url}"', platform_extra]
    for agent, credentials in grants.items():
        digest = hashlib.sha256(token(agent).encode()).hexdigest()
        lines += [f"[agents.{agent}]", f'token_sha256 = "{digest}"']
        lines += [f"[agents.{agent}.credentials]"]
        lines += [f"{platform} = {entry}" for platform, entry in credentials.items()]
    path = directory / "gateway.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def credential_file(directory: Path, value: str = "stored-credential") -> str:
    path = directory / "credential.txt"
    path.write_text(value + "\n")
    path.chmod(0o600)
    return f'{{ file = "{path}" }}'


#: A vault command that hands out a new token each time it is run: a refresh that renews.
ROTATING_CREDENTIAL = '{ command = ["sh", "-c", "echo rotated-$(date +%s%N)"] }'


@dataclass
class Rig:
    url: str
    app: GatewayApp
    engine: Engine
    clock: ManualClock
    client: httpx.AsyncClient
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)

    async def call(
        self, agent: str, path: str, method: str = "GET", **kwargs: Any
    ) -> httpx.Response:
        headers = {**auth(agent), **kwargs.pop("headers", {})}
        return await self.client.request(method, self.url + path, headers=headers, **kwargs)

    def count(self, agent: str) -> int:
        known = self.engine.keys()
        return self.engine.breaker(agent).count if agent in known else 0


StartRig = Callable[..., Any]


@pytest.fixture
async def start_gateway(tmp_path: Path) -> AsyncIterator[StartRig]:
    """`await start_gateway(config_path)`: a running gateway on its own port."""
    running: list[tuple[DrainingServer, asyncio.Task[None], Rig]] = []

    async def start(
        config_path: Path,
        deadline: float = DEADLINE,
        *,
        clock: ManualClock | None = None,
        shared: Store | None = None,
        sock: socket.socket | None = None,
    ) -> Rig:
        """A replica of a fleet when given the fleet's `clock` and a `shared` store; on `sock`
        (bound) when given, else on a free port."""
        config, digests = load(config_path)
        clock = clock or ManualClock()
        engine = Engine(AgentPolicy(deadline_seconds=deadline), clock=clock, shared=shared)
        engine.restore()
        app = GatewayApp(
            config, digests, config_path=config_path, engine=engine, idle_seconds=deadline
        )
        sock = sock or free_socket()
        options = Options(
            config_path=config_path, config=config, digests=digests, listen="127.0.0.1:0"
        )
        server = DrainingServer(uvicorn_config(app, options))
        server.config.timeout_graceful_shutdown = 1
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        port = sock.getsockname()[1]
        client = httpx.AsyncClient(timeout=10, limits=httpx.Limits(max_connections=100))
        rig = Rig(f"http://127.0.0.1:{port}", app, engine, clock, client)
        running.append((server, task, rig))
        return rig

    yield start
    # Last started, first stopped: each server puts back the signal handlers it found, so
    # stopping them in start order would leave the first one's handler installed for the
    # rest of the run (a Ctrl-C of pytest would then only stop a server that is gone).
    for server, task, rig in reversed(running):
        await rig.client.aclose()
        server.should_exit = True
        await task
        rig.engine.close()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    """A client for calls to several gateway processes at once (the replica tests)."""
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(timeout=10, limits=limits) as client:
        yield client


def body(response: httpx.Response) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(response.content)
    return result


@dataclass(frozen=True)
class DemoRun:
    """One `breakerdeck mcp --demo` run at 25x with `--events`, stopped (SIGTERM) once search's
    breaker refused a call."""

    port: int
    said: list[str]
    stdout: str
    events: Path


@pytest.fixture(scope="session")
def mcp_demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """The demo run once for the tests that read what it said and wrote (they share the xdist
    group "mcp-demo", so one worker runs it): it starts four processes that import the SDK."""
    directory = tmp_path_factory.mktemp("mcp-demo")
    events = directory / "events.jsonl"
    with free_socket() as probe:
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "breakerdeck.console.cli", "mcp", "--demo"]
    command += ["--state-dir", str(directory / "state"), "--speed", "25"]
    command += ["--events", str(events), "--feed-listen", f"127.0.0.1:{port}"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None and process.stdout is not None
    said: list[str] = []
    # Starts that miss their 10 s on a loaded machine are made good by later listings.
    deadline = time.monotonic() + 3 * BOUND_SECONDS
    try:
        while time.monotonic() < deadline:
            said.append(process.stderr.readline())
            if "search__lookup: circuit_open" in said[-1]:
                break
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    return DemoRun(port, said, process.stdout.read(), events)
