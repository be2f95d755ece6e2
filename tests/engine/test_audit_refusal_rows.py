"""A refusal's audit row is encoded on the writer thread from a template (`denied_fields`):
byte for byte what `json.dumps` writes for the same fields, whatever the strings hold."""

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from breakerdeck.engine.events import CallDenied
from breakerdeck.engine.storage.audit import AuditLog, denied_fields

HOSTILE = [
    'he said "no"',
    "back\\slash",
    "line\nbreak\ttab\r\x00\x1f\x7f",
    "</script><b>markup</b>&amp;",
    "ünïcödé ☃ 日本語 🚀",
    "\ud800 lone surrogate",
    "\u2028\u2029",
    "",
]


def _dumped(number: int, platform: str, reason: str | None, retry_after: float) -> str:
    fields = {
        "call_id": f"call-{number:06d}",
        "platform": platform,
        "reason": reason,
        "retry_after_seconds": retry_after,
    }
    return json.dumps(fields, allow_nan=False)


@pytest.mark.parametrize("text", HOSTILE)
def test_a_hostile_platform_is_encoded_as_json_dumps_encodes_it(text: str) -> None:
    assert denied_fields(7, text, "circuit_breaker_open", 29.5) == _dumped(
        7, text, "circuit_breaker_open", 29.5
    )


@given(
    number=st.integers(min_value=0, max_value=10**12),
    platform=st.text(),
    reason=st.none() | st.text(),
    retry_after=st.floats(allow_nan=False, allow_infinity=False) | st.integers(0, 10**6),
)
@settings(max_examples=300, deadline=None, derandomize=True)
def test_any_refusal_is_encoded_as_json_dumps_encodes_it(
    number: int, platform: str, reason: str | None, retry_after: float
) -> None:
    assert denied_fields(number, platform, reason, retry_after) == _dumped(
        number, platform, reason, retry_after
    )


@pytest.mark.parametrize("retry_after", [float("nan"), float("inf"), float("-inf")])
def test_a_retry_after_json_cannot_hold_is_refused_as_json_dumps_refuses_it(
    retry_after: float,
) -> None:
    with pytest.raises(ValueError):
        denied_fields(1, "search", None, retry_after)


def test_a_refusal_row_reads_back_as_the_line_it_was(tmp_path: Path) -> None:
    line = CallDenied(41, "search@default", "planner", 1_767_225_600.5, 9, 'se"arch', "held", 2.5)
    with AuditLog(tmp_path / "audit.sqlite3") as audit:
        audit.append_denied(line)
        [row] = audit.query()
    assert (row.seq, row.type, row.key, row.agent, row.wall, row.fields) == (
        41,
        "call.denied",
        "search@default",
        "planner",
        1_767_225_600.5,
        line.fields,
    )
