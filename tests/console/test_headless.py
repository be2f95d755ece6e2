"""The headless trace: a public format, checked line by line as an outside tool would."""

import itertools
import json
import os
import subprocess
import sys
from collections import defaultdict

import pytest

from breakerdeck.console.cli import main
from breakerdeck.fixtures import scenario as scenarios
from breakerdeck.fixtures.simulation import Simulation

#: One xdist worker runs the whole module, so its traces (module fixtures) are made once.
pytestmark = pytest.mark.xdist_group("headless")

KEYS = ["seq", "t", "at", "type", "key", "agent"]
CALL_FIELDS = [
    "call_id",
    "platform",
    "tool",
    "admitted_t",
    "admitted_as",
    "probe",
    "attempts",
    "deadline_seconds",
    "fault",
    "refresh",
    "platform_status",
    "agent_status",
    "outcome",
    "counted",
    "retry_after_seconds",
    "admitted_seq",
]


def trace(tmp_path, *args: str) -> list[dict]:
    out = tmp_path / "events.jsonl"
    assert main(["demo", "--headless", "--events", str(out), *args]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


@pytest.fixture(scope="module")
def outage(tmp_path_factory) -> list[dict]:
    return trace(
        tmp_path_factory.mktemp("outage"), "--scenario", "vendor-outage", "--duration", "3600"
    )


@pytest.fixture(scope="module")
def outage_tool(tmp_path_factory) -> list[dict]:
    return trace(
        tmp_path_factory.mktemp("outage-tool"),
        "--scenario",
        "vendor-outage",
        "--policy",
        "tool",
        "--duration",
        "3600",
    )


def test_the_same_seed_gives_the_same_bytes(tmp_path):
    first = trace(tmp_path, "--duration", "900", "--seed", "3")
    second = trace(tmp_path, "--duration", "900", "--seed", "3")
    assert first == second
    assert trace(tmp_path, "--duration", "900", "--seed", "4") != first


def test_every_line_starts_with_the_fixed_keys_in_order(outage):
    for line in outage:
        assert list(line)[:6] == KEYS


def test_seq_is_strictly_increasing(outage):
    seqs = [line["seq"] for line in outage]
    assert seqs == sorted(set(seqs))


def test_at_is_the_fixed_epoch_plus_t(outage):
    from datetime import UTC, datetime

    epoch = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    for line in outage[:200]:
        at = datetime.fromisoformat(line["at"].replace("Z", "+00:00")).timestamp()
        assert abs(at - (epoch + line["t"])) < 1e-3


def test_call_lines_carry_every_field_in_the_design_order(outage):
    for line in outage:
        if line["type"] == "call.completed":
            assert list(line)[6:] == CALL_FIELDS


def test_a_transition_comes_right_after_the_call_that_caused_it(outage, outage_tool):
    for lines in (outage, outage_tool):
        by_seq = {line["seq"]: (i, line) for i, line in enumerate(lines)}
        for index, line in enumerate(lines):
            if "cause_seq" not in line:
                continue
            cause_index, cause = by_seq[line["cause_seq"]]
            assert cause["t"] == line["t"]
            between = lines[cause_index + 1 : index]
            assert all(other["key"] != line["key"] or "cause_seq" in other for other in between)


def test_a_page_follows_its_reopened_line(outage):
    for index, line in enumerate(outage):
        if line["type"] == "circuit_breaker.page":
            previous = outage[index - 1]
            assert previous["type"] == "circuit_breaker.reopened"
            assert line["cause_seq"] == previous["seq"]


def test_admitted_seq_is_the_last_line_written_before_admission(outage):
    seqs = {line["seq"] for line in outage}
    for line in outage:
        if line["type"] == "call.completed" and line["admitted_seq"] is not None:
            assert line["admitted_seq"] < line["seq"]
            assert line["admitted_seq"] in seqs or line["admitted_seq"] == 0


def test_half_open_is_written_once_per_open_episode(outage_tool):
    per_key = defaultdict(list)
    for line in outage_tool:
        if line["type"].startswith("circuit_breaker."):
            per_key[line["key"]].append(line["type"])
    for types in per_key.values():
        for before, after in itertools.pairwise(types):
            assert not (before == after == "circuit_breaker.half_open")


def test_refusals_before_the_breaker_have_no_admission_and_no_attempts(tmp_path):
    lines = trace(tmp_path, "--scenario", "caller-bugs", "--duration", "1200")
    refused = [
        line
        for line in lines
        if line["outcome"] in {"permission_denied", "pending_approval", "refused_pre_call"}
    ]
    assert refused
    for line in refused:
        assert line["attempts"] == 0 and line["fault"] == "none"
        assert line["admitted_t"] is None and line["admitted_as"] is None
        assert line["admitted_seq"] is None and not line["counted"] and not line["probe"]


def test_attempts_equal_the_requests_the_fixture_counted():
    simulation = Simulation(scenarios.load("vendor-outage"), policy="tool")
    lines = []
    simulation.engine.subscribe(lines.append)
    simulation.run_headless(1800)
    calls = [e for e in lines if e.type == "call.completed"]
    assert calls
    for event in calls:
        fake = simulation.fakes[event.fields["platform"]]
        key = simulation.engine.idempotency_key(event.fields["call_id"])
        assert event.fields["attempts"] == fake.requests_for(key)


def test_a_run_on_an_existing_state_dir_restores_and_continues_the_clock(tmp_path):
    state = tmp_path / "state"
    first = trace(tmp_path, "--duration", "600", "--state-dir", str(state))
    second = trace(tmp_path, "--duration", "60", "--state-dir", str(state))
    restored = [line for line in second if line["type"] == "circuit_breaker.restored"]
    assert restored
    assert second[0]["seq"] > first[-1]["seq"]
    assert second[0]["at"] >= first[-1]["at"]
    opened = [r for r in restored if r["state"] == "open"]
    assert all(r["opened_t"] <= 0 for r in opened)


def test_call_ids_stay_unique_across_runs_on_one_state_dir(tmp_path):
    state = tmp_path / "state"
    first = trace(tmp_path, "--duration", "300", "--state-dir", str(state))
    second = trace(tmp_path, "--duration", "300", "--state-dir", str(state))
    ids = [line["call_id"] for line in first + second if line["type"] == "call.completed"]
    assert len(ids) == len(set(ids))


def test_the_trace_goes_to_stdout_and_messages_to_stderr():
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "breakerdeck.console.cli",
            "demo",
            "--headless",
            "--duration",
            "120",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert all(json.loads(line) for line in done.stdout.splitlines())
    assert "live-demo" in done.stderr


def test_scenarios_lists_every_scenario_with_its_policies(capsys):
    assert main(["scenarios"]) == 0
    out = capsys.readouterr().out
    for name in scenarios.names():
        assert name in out
    assert "[tool]" in out and "[agent, tool]" in out


def test_a_reader_gone_before_anything_is_written_is_an_io_error(monkeypatch, capsys):
    read_end, write_end = os.pipe()
    os.close(read_end)  # like `breakerdeck scenarios | head -0`
    monkeypatch.setattr(sys, "stdout", os.fdopen(write_end, "w", buffering=1))
    assert main(["scenarios"]) == 74
    assert "its reader is gone" in capsys.readouterr().err


def test_a_trace_reader_that_takes_some_and_leaves_ends_the_run_early(tmp_path):
    """`demo --headless | head -n 5`: the run stops (nothing more it does can be seen) and
    exits 0, since its reader took what it wanted."""
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "breakerdeck.console.cli",
            "demo",
            "--headless",
            "--duration",
            str(366 * 86400),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        head = subprocess.run(["head", "-n", "5"], stdin=run.stdout, capture_output=True)
        run.stdout.close()
        assert run.wait(timeout=60) == 0
    finally:
        run.kill()
    assert len(head.stdout.splitlines()) == 5
    assert b"Traceback" not in run.stderr.read()


def test_a_scenario_runs_under_its_own_policy_unless_one_is_given(tmp_path, capsys):
    lines = trace(tmp_path, "--scenario", "bad-deploy", "--duration", "600")
    assert any(line["type"] == "circuit_breaker.tripped" for line in lines)
    assert all("@" in line["key"] for line in lines)  # tool keys: backend@credential
    assert "bad-deploy under the tool policy" in capsys.readouterr().err


def test_a_policy_the_scenario_never_trips_under_is_run_with_a_warning(tmp_path, capsys):
    lines = trace(tmp_path, "--scenario", "bad-deploy", "--policy", "agent", "--duration", "600")
    assert not any(line["type"] == "circuit_breaker.tripped" for line in lines)
    assert "bad-deploy trips only under tool" in capsys.readouterr().err
