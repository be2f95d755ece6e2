"""What every adapter's test shares: a CRM backend on a fixture platform that counts requests,
and the tool functions the frameworks run against it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.policy import ToolPolicy
from breakerdeck.fixtures.faults import Fault, FaultKind
from breakerdeck.fixtures.platform import FakePlatform

KEY = "crm@default"
BACKENDS = {"lookup_customer": "crm", "send_email": "crm"}
REFUSED = Fault(FaultKind.REFUSED)


class Crm:
    """The tools' backend: every request reaches `platform`, which counts it."""

    def __init__(self, platform: FakePlatform) -> None:
        self.platform = platform
        self.client = httpx.AsyncClient(transport=platform, base_url="https://crm.test")
        #: What `lookup_customer` answers instead of the customer, when set.
        self.answer: Any = None

    async def lookup_customer(self, customer: str) -> Any:
        """Look a customer up by id."""
        response = await self.client.get(f"/customers/{customer}")
        response.raise_for_status()
        if self.answer is not None:
            return self.answer
        return {"customer": customer, "found": response.json()}

    async def send_email(self, to: str) -> str:
        """Send an email."""
        response = await self.client.post("/emails", json={"to": to})
        response.raise_for_status()
        return "sent"

    def down(self) -> None:
        self.platform.set_fault(REFUSED)

    def up(self) -> None:
        self.platform.set_fault(Fault(FaultKind.OK))

    def bad_request(self) -> None:
        self.platform.set_fault(Fault.http(400))

    def slow(self, seconds: float) -> None:
        self.platform.set_fault(Fault(FaultKind.SLOW, delay=seconds))


def fresh_engine(clock: ManualClock, state_dir: Path) -> Engine:
    """Another process's engine on the same state dir, its breakers restored."""
    engine = Engine(ToolPolicy(), clock=clock, state_dir=state_dir)
    engine.restore()
    return engine


class Driver:
    """One framework's agent loop with its scripted model, and the adapter on it: each `run`
    is one agent run in which the model asks for `calls` (tool name, arguments) at once, then
    answers once it has their results, which `seen` keeps as the model was given them.
    `reruns`: whether the framework's hook can run a tool again (a pair of hooks cannot);
    `agent_name`: the agent's name, as the framework lets it be spelled."""

    reruns = True
    agent_name = "support-bot"

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = [("lookup_customer", {"customer": "c-1"})]
        self.seen: list[Any] = []

    def build(self, engine: Engine, crm: Crm, **settings: Any) -> None:
        """The agent with the adapter on it, given `settings` (and `backends=`, by default
        `BACKENDS`)."""
        raise NotImplementedError

    async def run(self) -> None:
        raise NotImplementedError

    async def runs(self, times: int) -> None:
        for _ in range(times):
            await self.run()


def refusal(content: Any) -> dict[str, Any]:
    """What the model read of a refusal or a failure, as the structured result."""
    result: dict[str, Any] = json.loads(content) if isinstance(content, str) else content
    return result


def status_of(content: Any) -> str:
    """The status of a tool result the model read: `ok` for the tool's own output."""
    if isinstance(content, str) and content.startswith('{"status"'):
        return str(json.loads(content)["status"])
    if isinstance(content, dict) and "status" in content and "tool" in content:
        return str(content["status"])
    return "ok"


def keys_on(events: list[Any]) -> set[str]:
    return {event.key for event in events}
