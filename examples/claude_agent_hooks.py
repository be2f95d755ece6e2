"""The Claude Agent SDK: `breaker_hooks` for `ClaudeAgentOptions(hooks=...)`. The CLI needs a
model service, so offline this plays the CLI's part: for each tool use it calls the hooks as
the SDK calls them (`callback(input, tool_use_id, {"signal": None})`), runs the tool unless
`PreToolUse` denied it, and prints what the model would read (the deny reason, the tool's
output, or the failure with our `additionalContext`)."""

from __future__ import annotations

import itertools
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions
from story import BACKENDS, Ask, Crm, Story, run

from breakerdeck.adapters.claude_agent import breaker_hooks


async def fire(options: ClaudeAgentOptions, event: str, input: dict[str, Any]) -> dict[str, Any]:
    said: dict[str, Any] = {}
    for matcher in (options.hooks or {}).get(event, []):  # type: ignore[call-overload]
        for callback in matcher.hooks:
            output = await callback(
                {**input, "hook_event_name": event}, input["tool_use_id"], {"signal": None}
            )
            said = dict(output.get("hookSpecificOutput") or {}) or said
    return said


async def main(story: Story, crm: Crm) -> Ask:
    options = ClaudeAgentOptions(
        hooks=breaker_hooks(story.engine, BACKENDS)
    )  # the line a user adds
    ids = itertools.count(1)

    async def ask() -> Any:
        use = {
            "session_id": "example",
            "transcript_path": "/dev/null",
            "cwd": ".",
            "tool_name": "lookup_customer",  # an SDK MCP tool is named mcp__<server>__<tool>
            "tool_input": {"customer": "c-42"},
            "tool_use_id": f"toolu_{next(ids)}",
        }
        decided = await fire(options, "PreToolUse", use)
        if decided.get("permissionDecision") == "deny":
            return decided["permissionDecisionReason"]
        try:
            response = await crm.lookup_customer("c-42")
        except Exception as error:
            text = f"{type(error).__name__}: {error}"
            said = await fire(options, "PostToolUseFailure", {**use, "error": text})
            return f"{text} + additionalContext {said.get('additionalContext')}"
        await fire(options, "PostToolUse", {**use, "tool_response": response})
        return response

    return ask


if __name__ == "__main__":
    run(Story("Claude Agent SDK"), main)
