"""Issue 22: `breakerdeck replay` on a recorded incident, read-only, its cards computed by the
engine's own core over the recorded events.

One scenario run (`live-demo`, seed 7, 1,100 simulated seconds) is recorded once per module:
its trace, its state dir's audit log, and the live console's board (fed the engine's events
and views as the in-process console is) at three recorded moments. The replay, stepped to those
moments, must show the same cards and event log, line for line.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from breakerdeck.console.board import Board
from breakerdeck.console.card import Thresholds
from breakerdeck.console.replay import ReplaySource
from breakerdeck.console.replay_command import ReplayApp
from breakerdeck.console.screens.confirm import ConfirmScreen
from breakerdeck.console.widgets.cards import CardList
from breakerdeck.console.words import clock_text
from breakerdeck.engine.events import record
from breakerdeck.engine.recorded.playback import play_audit, play_trace
from breakerdeck.engine.recorded.replay import replay_audit, replay_trace
from breakerdeck.fixtures import scenario as scenarios
from breakerdeck.fixtures.simulation import Simulation
from tests.console.conftest import press, settle
from tests.console.helpers import cards_text, countdown_of, header_text, status_text
from tests.waiting import eventually

#: One xdist worker runs the whole module, so its recorded run (a module fixture) is made once.
pytestmark = pytest.mark.xdist_group("replay")

#: After the first trips (open, counting down); between a half-open and its page, another
#: breaker paged; after the recoveries, the timelines holding the whole first episode.
MOMENTS = (300.0, 626.0, 1000.0)
DURATION = 1100.0


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    where = tmp_path_factory.mktemp("recorded")
    sim = Simulation(scenarios.load("live-demo"), policy="agent", seed=7, state_dir=where / "s")
    epoch = sim.engine.epoch
    board = Board(Thresholds.of(sim.engine.policy))
    lines: list[str] = []
    moments = [epoch + t for t in MOMENTS]
    seen: dict[float, tuple[list, list]] = {}

    def listen(event) -> None:
        while moments and event.wall > moments[0]:
            seen[moments.pop(0)] = (list(board.cards()), list(board.log))
        lines.append(json.dumps(record(event, epoch), separators=(",", ":")))
        board.apply([event])  # what the console's reader does with each batch
        if event.view is not None:
            board.update([event.view])

    sim.engine.subscribe(listen)
    sim.run_headless(DURATION)
    trace = where / "trace.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    return SimpleNamespace(
        trace=trace, state=where / "s", seen=seen, epoch=epoch, replay=replay_trace(trace)
    )


def replay_app(source: ReplaySource) -> ReplayApp:
    return ReplayApp(source, operator="oncall-ann", tick_seconds=None, min_repaint_seconds=0)


def replaying(recorded, speed: float = 10.0) -> tuple[ReplaySource, ReplayApp]:
    """The recorded trace's replay, at its start and paused, and a console on it."""
    source = ReplaySource(play_trace(recorded.trace), label="replay", speed=speed)
    return source, replay_app(source)


def log_words(rows) -> list[tuple[str, str, str, str]]:
    return [(clock_text(r.wall), r.kind, r.name, r.text) for r in rows]


async def test_a_replayed_trace_shows_the_live_cards_at_three_recorded_moments(recorded):
    assert replay_trace(recorded.trace).divergences == []
    source = ReplaySource(play_trace(recorded.trace), label="replay")
    app = replay_app(source)
    async with app.run_test(size=(200, 60)) as pilot:
        shown = []
        for moment in MOMENTS:
            source.seek(recorded.epoch + moment)
            await settle(pilot)
            replayed = cards_text(app)
            live_cards, live_log = recorded.seen[recorded.epoch + moment]
            assert log_words(app.board.log) == log_words(live_log)
            cards = app.screen.query_one(CardList)
            cards.set_cards(live_cards)  # the live run's cards, drawn by the same widget
            assert cards_text(app) == replayed
            shown.append(replayed)
        assert countdown_of(shown[0], "billing-assistant") == "00:24"
        assert "PAGED" in shown[1] and "HALF-OPEN" in shown[1]
        assert "✓" in shown[2] and "recovered" in shown[2]


async def test_an_audit_log_replays_what_it_proves_with_the_counter_marked_approximate(
    recorded,
):
    files = {f.name: f.read_bytes() for f in recorded.state.iterdir()}
    from_log, from_trace = replay_audit(recorded.state), recorded.replay
    assert {f.name: f.read_bytes() for f in recorded.state.iterdir()} == files  # read only
    assert from_log.divergences == []
    source = ReplaySource(play_audit(recorded.state), label="replay")
    app = replay_app(source)
    async with app.run_test(size=(80, 24)) as pilot:
        source.seek(recorded.epoch + MOMENTS[1])
        await settle(pilot)
        assert re.search(r"≈\d+ failures? · trips at", cards_text(app))
        assert " 5 failures ·" not in cards_text(app)
        states = {c.key: (c.view.state, c.view.paged) for c in app.board.cards()}
    live = {c.key: (c.view.state, c.view.paged) for c in recorded.seen[recorded.epoch + 626][0]}
    assert {k: v for k, v in states.items() if v[0] != "closed"} == {
        k: v for k, v in live.items() if v[0] != "closed"
    }
    assert not from_trace.approximate


async def test_n_goes_to_the_first_trip_and_comma_steps_back_before_it(recorded):
    _source, app = replaying(recorded)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert "OPEN" not in cards_text(app)
        await press(pilot, "n")
        assert header_text(app).endswith("recorded time 00:00:23")
        assert countdown_of(cards_text(app), "invoice-clerk") == "05:00"
        await press(pilot, "comma")  # one event back: the trip has not happened yet
        assert countdown_of(cards_text(app), "invoice-clerk") != "05:00"
        assert "invoice-clerk" in cards_text(app)
        await press(pilot, "full_stop")
        assert countdown_of(cards_text(app), "invoice-clerk") == "05:00"


async def test_brackets_jump_a_minute_and_the_countdown_follows(recorded):
    _source, app = replaying(recorded)
    async with app.run_test(size=(80, 24)) as pilot:
        await press(pilot, "n", "right_square_bracket", "right_square_bracket")
        assert countdown_of(cards_text(app), "invoice-clerk") == "03:00"
        await press(pilot, "left_square_bracket")
        assert countdown_of(cards_text(app), "invoice-clerk") == "04:00"


async def test_space_plays_at_the_speed_and_pauses(recorded):
    source, app = replaying(recorded, speed=300.0)
    async with app.run_test(size=(80, 24)) as pilot:
        app.action_replay("play")  # space's action (a press waits for a playing app to idle)
        await eventually(lambda: source.clock - source.start > 60, "a minute of it played")
        await press(pilot, "space")
        paused_at = source.clock
        assert paused_at - source.start > 60 and not source.playing
        assert status_text(app).startswith(" ⏸ ×300 ")
        await pilot.pause(0.1)
        assert source.clock == paused_at
        await press(pilot, "minus")
        assert "⏸ ×120" in status_text(app)


async def test_a_replay_is_read_only(recorded):
    _source, app = replaying(recorded)
    async with app.run_test(size=(80, 24)) as pilot:
        await press(pilot, "n", "r", "f", "d")
        assert not isinstance(app.screen, ConfirmScreen)
        footer = {b.key for (_, b, shown, _) in app.screen.active_bindings.values() if shown}
        assert not {"r", "f", "d"} & footer
        assert "→ " in cards_text(app) and "(r)" not in cards_text(app)  # nor its hints
        palette = [command.title for command in app.get_system_commands(app.screen)]
        assert "Play/pause" in palette and "Reset" not in palette  # nor its palette


def test_replay_wants_one_recording(tmp_path, capsys):
    from breakerdeck.console import cli

    with pytest.raises(SystemExit) as both:
        cli.main(["replay", str(tmp_path / "t.jsonl"), "--state-dir", str(tmp_path)])
    assert both.value.code == 64
    (tmp_path / "t.jsonl").write_text("not json\n")
    assert cli.main(["replay", str(tmp_path / "t.jsonl")]) == 2
    assert "line 1: not a trace line" in capsys.readouterr().err
    assert cli.main(["replay", "--state-dir", str(tmp_path)]) == 2
    assert "no audit log" in capsys.readouterr().err


async def test_e_exports_the_incident_at_the_replays_clock(recorded, tmp_path):
    _source, app = replaying(recorded)
    app.export_dir = tmp_path
    async with app.run_test(size=(80, 24)) as pilot:
        await press(pilot, "n")
        key = app.screen.query_one(CardList).selected_card.key
        await pilot.press("e")
        await eventually(lambda: len(list(tmp_path.iterdir())) == 2, "the replay's export")
    text = next(tmp_path.glob("*.md")).read_text()
    assert text.startswith(f"# Incident: {key} (OPEN)")
    at = datetime.fromtimestamp(recorded.epoch + 23, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    assert f"**as of**: {at}" in text  # the recorded time, not now
    assert "| tripped |" in text and "Partial" not in text
