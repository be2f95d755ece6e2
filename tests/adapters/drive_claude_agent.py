"""The Claude Agent SDK's hooks, driven as the SDK drives them for the CLI (which needs a model
service): for each tool use, `PreToolUse`; unless denied, the tool runs here, then
`PostToolUse` or `PostToolUseFailure` with the error as text (an interrupt, `is_interrupt`,
when the run is cancelled mid-tool); each callback called as
`callback(input, tool_use_id, {"signal": None})` and its output converted as the SDK sends it."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from claude_agent_sdk._internal.query import _convert_hook_output_for_cli

from breakerdeck.adapters.claude_agent import BreakerHooks, breaker_hooks
from breakerdeck.engine.engine import Engine
from tests.adapters.support import BACKENDS, Crm, Driver


async def fire(hooks: BreakerHooks, event: str, input: dict[str, Any]) -> dict[str, Any]:
    """Every callback of every matcher for `event` (ours match every tool), as the SDK runs a
    `hook_callback` control request; the last output with something to say."""
    said: dict[str, Any] = {}
    for matcher in hooks.get(event, []):
        for callback in matcher.hooks:
            output = await callback(
                {**input, "hook_event_name": event}, input["tool_use_id"], {"signal": None}
            )
            said = _convert_hook_output_for_cli(dict(output)) or said
    return said.get("hookSpecificOutput", {})


class ClaudeAgentDriver(Driver):
    reruns = False

    def __init__(self) -> None:
        super().__init__()
        self.ids = itertools.count()

    def build(self, engine: Engine, crm: Crm, **settings: Any) -> None:
        self.crm = crm
        self.hooks = breaker_hooks(engine, settings.pop("backends", BACKENDS), **settings)

    async def run(self) -> None:
        await asyncio.gather(*(self.use(name, args) for name, args in self.calls))

    async def use(self, name: str, args: dict[str, Any]) -> None:
        """One tool use as the CLI makes it, and what the model reads of it."""
        input = {
            "session_id": "session-1",
            "transcript_path": "/tmp/transcript.jsonl",
            "cwd": "/tmp",
            "agent_type": "support-bot",
            "tool_name": name,
            "tool_input": args,
            "tool_use_id": f"toolu_{next(self.ids)}",
        }
        decided = await fire(self.hooks, "PreToolUse", input)
        if decided.get("permissionDecision") == "deny":
            self.seen.append(decided["permissionDecisionReason"])
            return
        try:
            response = await getattr(self.crm, name)(**args)
        except asyncio.CancelledError:  # an interrupt: the CLI reports it, then stops
            interrupt = {**input, "error": "Interrupted", "is_interrupt": True}
            await fire(self.hooks, "PostToolUseFailure", interrupt)
            raise
        except Exception as error:
            text = f"{type(error).__name__}: {error}"
            said = await fire(self.hooks, "PostToolUseFailure", {**input, "error": text})
            self.seen.append(said.get("additionalContext", text))
        else:
            said = await fire(self.hooks, "PostToolUse", {**input, "tool_response": response})
            self.seen.append(said.get("additionalContext", response))
