"""Not an example: the module every example imports (`from story import …`), and run alone it
says so. It holds what they share: a CRM on a loopback fixture platform that goes down and
comes back, one engine, the feed when `--serve HOST:PORT` is given, and the story each agent
is run through (each example says how its framework's agent is asked and what its model saw).

Run an example from the checkout, offline: `.venv/bin/python examples/pydantic_ai_agent.py`.
With `--serve 127.0.0.1:8765` it serves the engine's feed, pauses between the acts, and keeps
serving at the end until Ctrl-C, so `breakerdeck watch ws://127.0.0.1:8765 --token-file
<state dir>/viewer.token` shows the tool's card trip and recover.

Without `--state-dir` the engine's state dir (its verdicts, audit log and, with `--serve`, the
feed's tokens) is a temporary one, removed when the example ends: at the end of the story,
on Ctrl-C, and on SIGTERM, which ends the run as Ctrl-C does.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.feed.server import serve_feed
from breakerdeck.engine.front.serving import TokenFiles, feed_tokens, split_address
from breakerdeck.engine.policy import ToolPolicy
from breakerdeck.fixtures.faults import Fault, FaultKind
from breakerdeck.fixtures.platform import FakePlatform
from breakerdeck.fixtures.server import PlatformServer

#: The one tool every example's agent calls, and its backend: the breaker is `crm@default`.
BACKENDS = {"lookup_customer": "crm"}
#: What the model saw of one tool call: its text or the framework's value.
Ask = Callable[[], Awaitable[Any]]


class Crm:
    """The tool's backend: a fixture platform behind a real loopback HTTP server."""

    def __init__(self, server: PlatformServer, platform: FakePlatform) -> None:
        self.platform = platform
        self.client = httpx.AsyncClient(base_url=server.url("crm"), timeout=5.0)

    async def lookup_customer(self, customer: str) -> dict[str, Any]:
        """Look a customer up in the CRM by id."""
        response = await self.client.get(f"/customers/{customer}")
        response.raise_for_status()
        return {"customer": customer, "record": response.json()["data"]}


class Story:
    def __init__(self, framework: str) -> None:
        parser = argparse.ArgumentParser(description=f"{framework}: a breaker trips and recovers")
        parser.add_argument("--serve", metavar="HOST:PORT", help="serve the engine's feed there")
        parser.add_argument(
            "--pause",
            type=float,
            default=3.0,
            metavar="SECONDS",
            help="with --serve, the pause between acts, for a watching console (default 3)",
        )
        parser.add_argument(
            "--state-dir", type=Path, help="the engine's state dir (default: a new one)"
        )
        self.args = parser.parse_args()
        self.framework = framework
        #: Removed by `run` when the example ends, however it ends; a given one is kept.
        self.scratch: tempfile.TemporaryDirectory[str] | None = None
        if self.args.state_dir is None:
            self.scratch = tempfile.TemporaryDirectory(prefix="breakerdeck-example-")
        self.state_dir = self.args.state_dir or Path(self.scratch.name)
        #: Moved by the story: the cooldown passes when the story says so, not in real time.
        self.clock = ManualClock(epoch=time.time())
        self.engine = Engine(ToolPolicy(), clock=self.clock, state_dir=self.state_dir)
        self.platform = FakePlatform("crm")

    @contextlib.asynccontextmanager
    async def crm(self) -> AsyncIterator[Crm]:
        with PlatformServer({"crm": self.platform}, hang_seconds=1.0) as server:
            yield Crm(server, self.platform)

    async def tell(self, ask: Ask) -> None:
        """The acts: the CRM answers; it goes down and three calls fail (the breaker opens);
        the next is refused without a request; the cooldown passes, the CRM is back, the probe
        closes the breaker."""
        async with self._feed() as pause:
            await self._act("the CRM answers", ask, 1)
            self.platform.set_fault(Fault(FaultKind.REFUSED))
            await pause()
            await self._act("the CRM goes down", ask, 3)
            await pause()
            await self._act("the breaker is open", ask, 1)
            await pause()
            self.clock.advance(30)
            self.platform.set_fault(Fault(FaultKind.OK))
            await self._act("30 s later the CRM is back: the probe", ask, 1)
            view = self.engine.view("crm@default")
            print(f"\ncrm@default is {view.state}; the CRM saw {self.platform.requests} requests")

    async def _act(self, title: str, ask: Ask, calls: int) -> None:
        print(f"\n== {title}")
        for _ in range(calls):
            before = self.platform.requests
            seen = await ask()
            sent = self.platform.requests - before
            print(f"  [{sent} request{'s' * (sent != 1)}] the model saw: {seen}")

    @contextlib.asynccontextmanager
    async def _feed(self) -> AsyncIterator[Callable[[], Awaitable[None]]]:
        async def no_pause() -> None:
            return None

        if self.args.serve is None:
            yield no_pause
            return
        host, port = split_address(self.args.serve)
        viewer, operator = feed_tokens(_StateDirTokens(), self.state_dir)
        async with serve_feed(
            self.engine, host=host, port=port, viewer_token=viewer, operator_token=operator
        ) as feed:
            print(
                f"feed on {feed.url}: breakerdeck watch {feed.url} "
                f"--token-file {self.state_dir / 'viewer.token'}"
            )

            async def pause() -> None:
                await asyncio.sleep(self.args.pause)

            await pause()
            yield pause
            print("serving until Ctrl-C")
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.Event().wait()


class _StateDirTokens(TokenFiles):
    """The feed's tokens made in the state dir, as `breakerdeck serve` makes them."""

    viewer_token_file = None
    operator_token_file = None


def run(story: Story, main: Callable[[Story, Crm], Awaitable[Ask]]) -> None:
    """Build the example's agent (`main`, given the story and the CRM) and tell the story;
    then the temporary state dir goes, after a Ctrl-C or a SIGTERM too."""

    async def told() -> None:
        async with story.crm() as crm:
            await story.tell(await main(story, crm))

    signal.signal(signal.SIGTERM, signal.default_int_handler)  # ends the run as Ctrl-C does
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(told())
    finally:
        story.engine.close()
        if story.scratch is not None:
            story.scratch.cleanup()


if __name__ == "__main__":
    examples = sorted(p.name for p in Path(__file__).parent.glob("*.py") if p.name != "story.py")
    sys.exit(
        "story.py is the examples' shared module, not an example; run one of them:\n"
        + "".join(f"  .venv/bin/python examples/{name}\n" for name in examples)
    )
