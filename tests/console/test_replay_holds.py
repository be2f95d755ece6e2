"""`breakerdeck replay` of a `maintenance-hold` run: its trace and its audit log each show the
hold, with who and why, and its release, in the event log, and the card HELD while held; of a
`shadow-rollout` run, the cards SHADOW until the operator's switch to enforce."""

from __future__ import annotations

import json

import pytest

from breakerdeck.console.replay import ReplaySource
from breakerdeck.console.replay_command import ReplayApp
from breakerdeck.engine.events import record
from breakerdeck.engine.recorded.playback import play_audit, play_trace
from breakerdeck.engine.recorded.replay import replay_audit, replay_trace
from breakerdeck.fixtures import scenario as scenarios
from breakerdeck.fixtures.simulation import Simulation
from tests.console.conftest import settle
from tests.console.helpers import cards_text

#: One xdist worker runs the whole module, so its recorded runs (module fixtures) are made once.
pytestmark = pytest.mark.xdist_group("replay-holds")

#: The operator holds payments at 100 s, for 5 minutes, and releases it at 370 s.
HELD_AT, RELEASED_AT, DURATION = 100.0, 370.0, 400.0
REASON = "payments vendor maintenance window (announced, about 5 minutes)"


def record_run(where, name: str, duration: float):
    """A scenario's run under `agent`: its trace, its state dir, its epoch."""
    sim = Simulation(scenarios.load(name), policy="agent", seed=3, state_dir=where / "s")
    epoch = sim.engine.epoch
    lines: list[str] = []
    sim.engine.subscribe(
        lambda event: lines.append(json.dumps(record(event, epoch), separators=(",", ":")))
    )
    sim.run_headless(duration)
    trace = where / "trace.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    return trace, where / "s", epoch


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    return record_run(tmp_path_factory.mktemp("held"), "maintenance-hold", DURATION)


def replay_console(playback) -> tuple[ReplaySource, ReplayApp]:
    source = ReplaySource(playback, label="replay")
    app = ReplayApp(source, operator="oncall-ann", tick_seconds=None, min_repaint_seconds=0)
    return source, app


def test_the_core_folds_the_hold_and_its_release_as_recorded(recorded):
    trace, state, _epoch = recorded
    assert replay_trace(trace).divergences == []
    assert replay_audit(state).divergences == []


def rows(app, kind: str) -> list[str]:
    return [f"{row.name} {row.text}" for row in app.board.log if row.kind == kind]


@pytest.mark.parametrize("recording", ["trace", "audit log"])
async def test_a_replay_shows_the_hold_who_and_why_and_its_release(recorded, recording):
    trace, state, epoch = recorded
    source, app = replay_console(play_trace(trace) if recording == "trace" else play_audit(state))
    async with app.run_test(size=(80, 24)) as pilot:
        source.seek(epoch + HELD_AT + 60)
        await settle(pilot)
        assert "HELD        billing-assistant" in cards_text(app)
        [hold, *_] = rows(app, "HOLD")
        assert f"by oncall:dana until 00:06:40: {REASON}" in hold
        assert app.screen.check_action("release", ()) is False  # nor any write, in a replay
        source.seek(epoch + RELEASED_AT + 5)
        await settle(pilot)
        assert rows(app, "RELEASE")[0].endswith("by oncall:dana")


@pytest.fixture(scope="module")
def rollout(tmp_path_factory):
    return record_run(tmp_path_factory.mktemp("shadow"), "shadow-rollout", 410)


async def test_a_replayed_shadow_rollout_reads_shadow_until_the_switch_to_enforce(rollout):
    trace, _state, epoch = rollout
    source, app = replay_console(play_trace(trace))
    async with app.run_test(size=(80, 24)) as pilot:
        source.seek(epoch + 100)  # payments down: its agents' breakers open, in shadow
        await settle(pilot)
        assert "OPEN · SHADOW billing-assistant" in cards_text(app)
        source.seek(epoch + 405)  # switched to enforce at 400
        await settle(pilot)
        assert "SHADOW billing-assistant" not in cards_text(app)
        assert any(row.kind == "MODE" for row in app.board.log)
