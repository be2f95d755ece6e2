"""DESIGN's bad input for the adapters: each gets a clear message, and nothing is counted that
the policy does not count."""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

import pytest
from pydantic import BaseModel

from breakerdeck.adapters.calls import AdapterError
from breakerdeck.engine.engine import Engine
from tests.adapters.support import BACKENDS, KEY, Crm, Driver, refusal, status_of

#: The frameworks that hand the adapter their tool list (Claude's hooks see one tool at a time).
LISTING = ("pydantic_ai", "openai_agents", "langchain", "google_adk")


class Customer(BaseModel):
    customer: str


@pytest.mark.parametrize("driver", LISTING, indirect=True)
async def test_backends_naming_a_tool_the_agent_lacks_is_warned_of_by_name(
    driver: Driver, engine: Engine, crm: Crm
) -> None:
    with pytest.warns(UserWarning, match="the agent does not have: refund"):
        driver.build(engine, crm, backends={**BACKENDS, "refund": "crm"})
        await driver.run()


async def test_a_backends_callable_that_raises_stops_the_call_with_its_name(
    driver: Driver, engine: Engine, crm: Crm, events: list[Any]
) -> None:
    def broken(tool: str) -> str:
        raise KeyError(tool)

    # ADK wraps what a plugin raises in a RuntimeError of its own, our words kept.
    with pytest.raises((AdapterError, RuntimeError), match=r"backends\('lookup_customer'\) raised"):
        driver.build(engine, crm, backends=broken)
        await driver.run()
    assert (crm.platform.requests, events) == (0, [])


async def test_a_result_failing_its_schema_is_counted_even_when_json_cannot_carry_it(
    driver: Driver, engine: Engine, crm: Crm
) -> None:
    crm.answer = object()  # no JSON, no Customer
    driver.build(engine, crm, schemas={"lookup_customer": Customer})
    await driver.run()
    answer = refusal(driver.seen[-1])
    assert answer["status"] == "tool_error"
    assert answer["reason"] == "the result fails Customer: 1 errors"
    assert engine.view(KEY).count == 1


async def test_a_result_json_cannot_carry_is_handed_back_to_the_framework_uncounted(
    driver: Driver, engine: Engine, crm: Crm
) -> None:
    crm.answer = {"when": {1, 2}}  # a set: the framework's to render, not ours
    driver.build(engine, crm)
    crm.down()
    await driver.runs(2)
    crm.up()
    await driver.run()
    assert status_of(driver.seen[-1]) == "ok"
    assert engine.view(KEY).count == 0  # a success: the two failures before it are forgiven


@pytest.mark.parametrize(
    ("module", "framework", "requirement"),
    [
        ("pydantic_ai", "pydantic_ai", "pydantic-ai-slim>=2.68"),
        ("openai_agents", "agents", "openai-agents>=0.24"),
        ("langchain", "langchain.agents.middleware", "langchain>=1.5"),
        ("claude_agent", "claude_agent_sdk", "claude-agent-sdk>=0.2.184"),
        ("google_adk", "google.adk.plugins.base_plugin", "google-adk>=2.13"),
    ],
)
def test_a_framework_without_the_hook_is_an_import_error_naming_the_version(
    module: str, framework: str, requirement: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, framework, types.ModuleType(framework))  # the hook's gone
    monkeypatch.delitem(sys.modules, f"breakerdeck.adapters.{module}", raising=False)
    with pytest.raises(ImportError, match=f"needs {requirement} for "):
        importlib.import_module(f"breakerdeck.adapters.{module}")
