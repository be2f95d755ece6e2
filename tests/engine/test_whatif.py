"""Issue 32: `whatif`'s tally of a shadow breaker's `call.would_deny` lines (DESIGN, "Operator
control: hold and shadow"), and the readers it shares with `replay`: a trace, read a chunk at a
time, and an audit log written through the engine's own `AuditLog`, read a batch at a time.

The lines are written by the doors' own writers (`TraceFile`, `AuditLog`), with the fields the
design gives `call.would_deny`: those of `call.denied` plus `outcome` and `attempt_seconds`.
"""

from __future__ import annotations

import json
import math
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from breakerdeck.engine.events import CALL_COMPLETED, CALL_DENIED, Event
from breakerdeck.engine.recorded import traceindex
from breakerdeck.engine.recorded.replay import ReplayError, read_audit
from breakerdeck.engine.recorded.traceindex import TypeLines
from breakerdeck.engine.recorded.whatif import SAID, WOULD_DENY, WhatIf, what_if
from breakerdeck.engine.storage.audit import AuditLog
from breakerdeck.engine.storage.tracefile import TraceFile

EPOCH = 1_767_225_600.0
T = TypeVar("T")
OPEN, PROBE = "circuit_breaker_open", "probe_in_flight"


def would_deny(
    seq: int, key: str, outcome: str, seconds: object, reason: str = OPEN, **more: object
) -> Event:
    """A shadow breaker's would-be refusal of a call that then went through and ended so."""
    fields = {
        "call_id": f"call-{seq:06d}",
        "platform": "payments",
        "reason": reason,
        "retry_after_seconds": 30.0,
        "outcome": outcome,
        "attempt_seconds": seconds,
        **more,
    }
    return Event(seq, WOULD_DENY, key, key.split("@")[0], EPOCH + seq, fields)


def incident() -> list[Event]:
    """Two keys in shadow through an outage: billing's platform was down (ten of its eleven
    would-be refusals failed anyway, one on a probe in flight), crm's was not (three of its
    four succeeded); the lines around them are what a trace holds besides."""
    lines: list[Event] = []

    def add(key: str, outcome: str, seconds: float, reason: str = OPEN) -> None:
        lines.append(would_deny(len(lines) + 1, key, outcome, seconds, reason))
        seq = len(lines) + 1
        fields = {"call_id": f"call-{seq:06d}", "outcome": outcome}
        lines.append(Event(seq, CALL_COMPLETED, key, key, EPOCH + seq, fields))

    for _ in range(9):
        add("billing", "upstream_failure", 30.0)
    add("billing", "success", 0.4)
    add("billing", "upstream_failure", 30.0, PROBE)
    for _ in range(3):
        add("crm", "success", 0.2)
    add("crm", "rate_limited", 1.5)
    lines.append(Event(len(lines) + 1, CALL_DENIED, "crm", "crm", EPOCH, {"reason": OPEN}))
    return lines


def write_trace(path: Path, events: list[Event]) -> Path:
    """The events as a door's `--events FILE` writes them."""
    trace = TraceFile(path)
    listener = trace.listener(EPOCH)
    for event in events:
        listener(event)
    trace.close()
    return path


def write_audit(state_dir: Path, events: list[Event]) -> Path:
    """The events through the engine's audit log, as a door's state dir keeps them."""
    state_dir.mkdir(exist_ok=True)
    log = AuditLog(state_dir / "audit.sqlite3", wall=lambda: EPOCH)
    for event in events:
        log.append(event)
        if log.queued >= 10_000:
            assert log.flush(timeout=60)
    log.close()
    assert log.problems == []
    return state_dir


def numbers(result: WhatIf) -> dict[str, tuple[int, int, int, float]]:
    return {
        key: (t.would_deny, t.false_refusals, t.saved, round(t.seconds_saved, 3))
        for key, t in result.ranked()
    }


def trace_tally(path: Path) -> tuple[WhatIf, TypeLines]:
    with path.open("rb") as file:
        lines = TypeLines(file, str(path), (WOULD_DENY,))
        return what_if(lines), lines


# -- the tally ---------------------------------------------------------------------------------


def test_per_key_the_calls_shadow_would_have_refused_split_by_what_the_platform_answered():
    result = what_if(incident())
    assert numbers(result) == {"billing": (11, 1, 10, 300.0), "crm": (4, 3, 1, 1.5)}
    total = result.total()
    assert (total.would_deny, total.false_refusals, total.saved) == (15, 4, 11)
    assert all(t.false_refusals + t.saved == t.would_deny for _, t in result.ranked())


def test_a_false_refusals_seconds_are_not_seconds_saved():
    result = what_if([would_deny(1, "k", "success", 12.0), would_deny(2, "k", "auth_failure", 1)])
    assert numbers(result) == {"k": (2, 1, 1, 1.0)}


@pytest.mark.parametrize(
    "outcome", ["caller_error", "platform_answer", "gateway_busy", "refused_pre_call"]
)
def test_an_uncounted_answer_is_saved_not_a_false_refusal(outcome):
    assert numbers(what_if([would_deny(1, "k", outcome, 2.5)])) == {"k": (1, 0, 1, 2.5)}


def test_each_key_splits_by_the_reason_it_would_have_refused_with():
    billing = what_if(incident()).keys["billing"].by_reason
    assert {reason: t.record() for reason, t in billing.items()} == {
        OPEN: {"would_deny": 10, "false_refusals": 1, "saved": 9, "seconds_saved": 270.0},
        PROBE: {"would_deny": 1, "false_refusals": 0, "saved": 1, "seconds_saved": 30.0},
    }


def test_lines_of_other_types_are_passed_over():
    others = [e for e in incident() if e.type != WOULD_DENY]
    assert len(others) == 16
    assert what_if(others).keys == {}


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"attempt_seconds": -1.0}, "attempt_seconds -1.0 is not 0 to"),
        ({"attempt_seconds": "3"}, "attempt_seconds '3' is not a number"),
        ({"attempt_seconds": True}, "attempt_seconds True is not a number"),
        ({"attempt_seconds": None}, "attempt_seconds None is not a number"),
        ({"attempt_seconds": math.nan}, "attempt_seconds nan is not 0 to"),
        ({"attempt_seconds": 1e300}, "attempt_seconds 1e+300 is not 0 to"),
        ({"outcome": "sucess"}, "outcome 'sucess' is not an outcome class"),
        ({"outcome": ["success"]}, "outcome ['success'] is not an outcome class"),
        ({"reason": None}, "reason None is not a refusal's reason"),
        ({"reason": ""}, "reason '' is not a refusal's reason"),
    ],
)
def test_a_would_deny_line_whose_fields_are_not_the_designs_is_skipped_and_said(fields, said):
    bad = would_deny(7, "k", "success", 1.0)
    bad.fields.update(fields)
    result = what_if([would_deny(1, "k", "upstream_failure", 2.0), bad])
    assert numbers(result) == {"k": (1, 0, 1, 2.0)}
    assert result.skipped == 1
    assert len(result.problems) == 1
    assert result.problems[0].startswith(f"{WOULD_DENY} seq 7 (key 'k'): {said}")


def test_a_line_missing_its_fields_is_skipped_and_only_the_first_few_are_said():
    bare = [Event(n, WOULD_DENY, "k", None, EPOCH, {}) for n in range(1, 101)]
    result = what_if(bare)
    assert (result.keys, result.skipped, len(result.problems)) == ({}, 100, SAID)


# -- the readers: a trace and an audit log, read alike -----------------------------------------


def test_a_trace_and_the_audit_log_of_the_same_run_tally_alike(tmp_path):
    events = incident()
    from_trace, lines = trace_tally(write_trace(tmp_path / "trace.jsonl", events))
    audit = write_audit(tmp_path / "state", events) / "audit.sqlite3"
    from_audit = what_if(read_audit(audit, (WOULD_DENY,)))
    assert numbers(from_trace) == numbers(from_audit) == numbers(what_if(events))
    assert (lines.skipped, from_trace.skipped, from_audit.skipped) == (0, 0, 0)


def test_the_audit_log_is_asked_for_would_deny_rows_alone(tmp_path):
    audit = write_audit(tmp_path / "state", incident()) / "audit.sqlite3"
    read = list(read_audit(audit, (WOULD_DENY,)))
    assert len(read) == 15 and {e.type for e in read} == {WOULD_DENY}
    assert [e.seq for e in read] == sorted(e.seq for e in read)


def test_a_trace_reader_skips_what_is_not_a_trace_line_and_reads_on(tmp_path):
    path = write_trace(tmp_path / "trace.jsonl", incident())
    good = path.read_bytes().splitlines(keepends=True)
    cut = good[2][: len(good[2]) // 2] + b"\n"  # a would-deny line cut short
    path.write_bytes(b"".join([*good[:2], cut, b"not json\n", b"\n", *good[3:]]))
    result, lines = trace_tally(path)
    assert numbers(result)["billing"] == (10, 1, 9, 270.0)
    assert lines.skipped == 2
    assert "line 3: not a trace line" in lines.problems[0]
    assert "line 4: not a trace line" in lines.problems[1]


def test_an_audit_log_that_is_not_one_is_a_clear_error(tmp_path):
    with pytest.raises(ReplayError, match="no audit log at"):
        list(read_audit(tmp_path / "audit.sqlite3", (WOULD_DENY,)))
    (tmp_path / "audit.sqlite3").write_bytes(b"SQLite format 3\x00" + b"\xff" * 4096)
    with pytest.raises(ReplayError, match="is not a readable audit log"):
        list(read_audit(tmp_path / "audit.sqlite3", (WOULD_DENY,)))


# -- bounded memory: what a reader holds is a chunk's worth, never the file's. Traced, every
# allocation costs, so the chunk is made small here and the trace a few times the bound;
# tests/console/test_whatif.py tallies a 1,000,000-line trace through the command as a user
# would, and reads its peak RSS.

#: Peak traced memory while tallying a recording several times larger.
BOUND = 2 << 20


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(traceindex, "CHUNK", 64 << 10)


def traced_peak(read: Callable[[], T]) -> tuple[T, int]:
    """What `read` returns, and the most memory it held at once (bytes, as traced)."""
    tracemalloc.start()
    try:
        found = read()
        return found, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def big_trace(path: Path, blocks: int) -> Path:
    """`blocks` of ten lines (in thousands), one a would-be refusal, alternately billing's
    (failed) and crm's (succeeded)."""
    lines = []
    for n in range(9):
        line = {"seq": n, "t": 1.0, "at": "2026-01-01T00:00:01.000Z", "type": CALL_COMPLETED,
                "key": "billing", "agent": "billing", "outcome": "success"}  # fmt: skip
        lines.append(json.dumps(line, separators=(",", ":")))
    pair = []
    for key, outcome in (("billing", "upstream_failure"), ("crm", "success")):
        line = {"seq": 10, "t": 1.0, "at": "2026-01-01T00:00:01.000Z", "type": WOULD_DENY,
                "key": key, "agent": key, **would_deny(10, key, outcome, 0.5).fields}  # fmt: skip
        pair.append("\n".join([*lines, json.dumps(line, separators=(",", ":"))]) + "\n")
    thousand = ("".join(pair) * 500).encode()
    with path.open("wb") as out:
        for _ in range(blocks // 1000):
            out.write(thousand)
    return path


def test_a_trace_is_tallied_a_chunk_at_a_time(tmp_path, small_chunks):
    path = big_trace(tmp_path / "big.jsonl", 5_000)
    assert path.stat().st_size > 3 * BOUND  # what a reader that kept the file would pass
    (result, lines), peak = traced_peak(lambda: trace_tally(path))
    assert lines.lines == 50_000
    assert numbers(result) == {"billing": (2500, 0, 2500, 1250.0), "crm": (2500, 2500, 0, 0.0)}
    assert peak < BOUND, f"peak {peak / 2**20:.1f} MiB"


def test_an_audit_log_is_read_a_batch_at_a_time(tmp_path):
    state = write_audit(
        tmp_path / "state",
        [would_deny(n, f"key-{n % 3}", "upstream_failure", 1.0) for n in range(1, 30_001)],
    )
    result, peak = traced_peak(lambda: what_if(read_audit(state / "audit.sqlite3", (WOULD_DENY,))))
    assert result.total().would_deny == 30_000
    assert peak < BOUND, f"peak {peak / 2**20:.1f} MiB"  # the rows whole: ~30 MiB


def test_a_file_without_line_ends_is_never_held_whole(tmp_path):
    path = tmp_path / "one-line.jsonl"
    with path.open("wb") as out:
        for _ in range(40):
            out.write(b"x" * (1 << 20))
    (result, lines), peak = traced_peak(lambda: trace_tally(path))
    assert (result.keys, lines.skipped, lines.started) == ({}, 1, False)
    assert "line 1: longer than 1048576 bytes" in lines.problems[0]
    assert peak < 6 << 20, f"peak {peak / 2**20:.1f} MiB"  # twice a line's bound and a chunk
