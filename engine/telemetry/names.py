"""The names telemetry uses, in one place: the GenAI conventions' (the standalone
`semantic-conventions-genai` release: the `execute_tool` span, `gen_ai.execute_tool.duration`),
and breakerdeck's own under `breakerdeck.*` (no convention for breakers exists yet:
semantic-conventions #2355). No OpenTelemetry import: plain strings and dicts.

`OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental` asks an instrumentation that emitted
the GenAI conventions of v1.36 or before to emit the latest instead; breakerdeck never emitted
an older version, so it emits the latest with or without it (docs/telemetry.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from breakerdeck.engine.events import Event
from breakerdeck.engine.parts.call import Call

SCOPE = "breakerdeck"
EXECUTE_TOOL = "execute_tool"
ATTEMPT = "breakerdeck.attempt"

OPERATION = "gen_ai.operation.name"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
ERROR_TYPE = "error.type"

KEY = "breakerdeck.key"
AGENT = "breakerdeck.agent"
PROBE = "breakerdeck.probe"
ATTEMPTS = "breakerdeck.attempts"
ATTEMPT_NUMBER = "breakerdeck.attempt.number"
OUTCOME = "breakerdeck.outcome"
COUNTED = "breakerdeck.counted"
DENIED = "breakerdeck.denied_reason"
RETRY_AFTER = "breakerdeck.retry_after"
CALL_ID = "breakerdeck.call.id"

#: A transition's fields a span event carries: numbers and the design's own words, never an
#: operator's free text (a reset's reason is in the audit log and the log line, which OTLP
#: logs export as a record when they are on: docs/telemetry.md).
_EVENT_FIELDS = ("failure_class", "count", "cooldown_seconds", "actor", "state")


def call_attributes(call: Call) -> dict[str, Any]:
    """What a call's span says from its start: the tool (the gateway's: the platform), the
    call's id, its breaker's key and its agent."""
    return {
        OPERATION: EXECUTE_TOOL,
        TOOL_NAME: call.tool,
        TOOL_CALL_ID: call.call_id,
        KEY: call.key,
        AGENT: call.agent,
    }


def adopted_attributes(call: Call, present: Mapping[str, Any]) -> dict[str, Any]:
    """What breakerdeck adds to a framework's own `execute_tool` span: the framework's
    `gen_ai.*` attributes stay as it set them (its `gen_ai.tool.call.id` is the model's id for
    the call), breakerdeck's call id goes in `breakerdeck.call.id`."""
    attributes = {k: v for k, v in call_attributes(call).items() if k not in present}
    attributes[CALL_ID] = call.call_id
    return attributes


def transition_attributes(event: Event) -> dict[str, Any]:
    fields = event.fields
    attributes: dict[str, Any] = {KEY: event.key}
    for name in _EVENT_FIELDS:
        value = fields.get(name)
        if value is not None:
            attributes[f"breakerdeck.{name}"] = value
    return attributes
