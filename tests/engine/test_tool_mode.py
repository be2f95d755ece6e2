"""`Tool(mode=...)`: a registered tool names its keys' breaker mode (DESIGN, "Operator control:
hold and shadow"). A key is `<backend>@<credential>`, known only at a call, so each is
configured on the engine when the tool first calls it; an operator's write still wins."""

import pytest

from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.harness import Harness, Tool
from breakerdeck.engine.policy import ToolPolicy
from tests.engine.test_shadow import Backend


def harnessed(mode: str | None) -> tuple[Engine, Harness, Backend]:
    engine = Engine(ToolPolicy(), clock=ManualClock())
    backend = Backend()
    harness = Harness(engine)
    harness.register(Tool("lookup", backend="crm", attempts=1, function=backend.run, mode=mode))
    return engine, harness, backend


async def test_a_shadow_tools_calls_reach_its_backend_under_every_credential() -> None:
    engine, harness, backend = harnessed("shadow")
    for credential in ("acme", "globex"):
        for _ in range(5):
            answer = await harness.call_tool("ava", "lookup", credential=credential)
            assert answer["status"] == "tool_error"
        view = engine.view(f"crm@{credential}")
        assert (view.state, view.mode) == ("open", "shadow")
    assert backend.calls == 10


async def test_a_tool_without_a_mode_takes_the_engines() -> None:
    engine, harness, backend = harnessed(None)
    for _ in range(5):
        await harness.call_tool("ava", "lookup")
    assert backend.calls == 3
    assert engine.view("crm@default").mode == "enforce"


async def test_an_operators_write_wins_over_the_tools_mode() -> None:
    engine, harness, backend = harnessed("shadow")
    for _ in range(3):
        await harness.call_tool("ava", "lookup")
    engine.set_mode("crm@default", "enforce", "ana", "seen enough")
    answer = await harness.call_tool("ava", "lookup")
    assert answer["status"] == "circuit_open"
    assert backend.calls == 3


def test_an_unknown_mode_is_refused_naming_the_tool() -> None:
    with pytest.raises(ValueError, match="tool 'lookup': mode must be 'enforce' or 'shadow'"):
        Tool("lookup", backend="crm", mode="shdow")


def test_two_tools_of_one_backend_cannot_name_different_modes() -> None:
    harness = Harness(Engine(ToolPolicy(), clock=ManualClock()))
    harness.register(Tool("lookup", backend="crm", function=Backend().run, mode="shadow"))
    harness.register(Tool("search", backend="crm", function=Backend().run))
    with pytest.raises(ValueError, match="share a breaker"):
        harness.register(Tool("update", backend="crm", function=Backend().run, mode="enforce"))


async def test_a_shadow_tool_configures_its_key_though_a_tool_without_a_mode_called_it_first():
    engine = Engine(ToolPolicy(), clock=ManualClock())
    backend = Backend()
    harness = Harness(engine)
    harness.register(Tool("search", backend="crm", attempts=1, function=backend.run))
    harness.register(Tool("lookup", backend="crm", attempts=1, function=backend.run, mode="shadow"))
    await harness.call_tool("ava", "search")
    assert engine.view("crm@default").mode == "enforce"
    await harness.call_tool("ava", "lookup")
    assert engine.view("crm@default").mode == "shadow"
