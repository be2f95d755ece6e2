"""Issue 30: a replay reads its trace as it plays. The trace is indexed in the background and
each event decoded and folded only when the cursor reaches it; moving back starts from a
checkpoint of the folded state. The replay opens at its first event, lands where a whole-file
fold would, says which lines it skipped, and holds a bounded number of decoded events.
"""

from __future__ import annotations

import bisect
import json

import pytest

from breakerdeck.console.replay import ReplaySource
from breakerdeck.console.replay_command import ReplayApp
from breakerdeck.console.screens.detail import DetailScreen
from breakerdeck.engine.events import record
from breakerdeck.engine.recorded import playback as pb
from breakerdeck.engine.recorded.playback import play_trace
from breakerdeck.engine.recorded.replay import replay_trace
from breakerdeck.engine.recorded.traceindex import TraceIndex
from breakerdeck.fixtures import scenario as scenarios
from breakerdeck.fixtures.simulation import Simulation
from tests.console.conftest import open_screen, settle
from tests.console.helpers import cards_text, static_text, status_text

#: One xdist worker runs the whole module, so its demo trace (a module fixture) is made once.
pytestmark = pytest.mark.xdist_group("replay-index")

#: Large enough that the index is built while the console is up, and far more events than
#: the player keeps decoded.
LARGE = 50_000


def big_trace(path, lines: int, *, bad_at: int | None = None) -> None:
    """`lines` calls of one agent: five refused (a trip), then successes, one a second."""
    with path.open("w") as out:
        for n in range(1, lines + 1):
            if n == bad_at:
                out.write('{"seq": oops, this line was cut\n')
                continue
            failed = n <= 5
            line = {
                "seq": n, "t": float(n), "at": "", "type": "call.completed",
                "key": "ava", "agent": "ava", "call_id": f"call-{n}", "platform": "payments",
                "tool": "charge", "admitted_as": "normal", "probe": False, "fault": "refused"
                if failed else "ok", "outcome": "upstream_failure" if failed else "success",
                "counted": failed,
            }  # fmt: skip
            line["at"] = f"2026-01-01T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}.000Z"
            out.write(json.dumps(line, separators=(",", ":")) + "\n")


@pytest.fixture(scope="module")
def demo_trace(tmp_path_factory):
    """A `live-demo` run (seed 7, 1,100 simulated seconds) as its trace."""
    where = tmp_path_factory.mktemp("demo")
    sim = Simulation(scenarios.load("live-demo"), policy="agent", seed=7)
    lines: list[str] = []
    epoch = sim.engine.epoch
    sim.engine.subscribe(
        lambda e: lines.append(json.dumps(record(e, epoch), separators=(",", ":")))
    )
    sim.run_headless(1100.0)
    trace = where / "trace.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    return trace


def app_on(source: ReplaySource) -> ReplayApp:
    return ReplayApp(source, operator="oncall-ann", tick_seconds=None, min_repaint_seconds=0)


def wait_indexed(source: ReplaySource) -> None:
    """The premise the end of a trace waits on: the scan reached it."""
    source.store.reach(float("inf"))
    assert source.store.done


def wait_checkpointed(player: pb.Playback) -> None:
    """The premise a move anywhere waits on: the background fold reached the end."""
    player.start()
    player._ahead.join(timeout=300)
    assert player.checkpointed


async def test_a_large_trace_opens_at_its_first_event_while_it_is_indexed(tmp_path):
    big_trace(tmp_path / "big.jsonl", LARGE)
    source = ReplaySource(play_trace(tmp_path / "big.jsonl"), label="replay")
    assert source.cursor == 1 and source.playback.position == 1  # nothing else folded
    app = app_on(source)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert status_text(app).startswith(" ⏸ ×10 1/")
        assert "ava" in cards_text(app)
        wait_indexed(source)
        assert f"1/{LARGE:,} " in source.status()  # what the status line shows at its tick


async def test_the_trace_is_read_on_only_once_the_first_screen_is_drawn(tmp_path, monkeypatch):
    big_trace(tmp_path / "big.jsonl", 20_000)
    source = ReplaySource(play_trace(tmp_path / "big.jsonl"), label="replay")
    player, first = source.playback, source.store.count()
    assert not player.started and 0 < first < 20_000  # the first chunk only
    app = app_on(source)
    at_start: list[tuple[str, int]] = []
    start = player.start

    def noted() -> None:
        at_start.append((cards_text(app), source.store.count()))
        start()

    monkeypatch.setattr(player, "start", noted)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        wait_indexed(source)
        assert player.started
    [(cards, count)] = at_start
    assert "ava" in cards and count == first  # drawn from the first chunk, nothing read on


async def test_the_player_holds_a_bounded_number_of_decoded_events(tmp_path):
    big_trace(tmp_path / "big.jsonl", LARGE)
    source = ReplaySource(play_trace(tmp_path / "big.jsonl"), label="replay")
    wait_indexed(source)
    player = source.playback
    wait_checkpointed(player)
    source.seek(source.end)
    assert source.cursor == LARGE and player.position == LARGE
    assert len(player.told) <= pb.WINDOW
    assert len(player.checkpoints) == LARGE // pb.CHECKPOINT + 1
    assert len(source.recent(2000)) <= pb.WINDOW + 2000
    source.seek(source.start + LARGE // 2 - 1)  # back: from the checkpoint before, not the start
    assert player.position == LARGE // 2
    assert {v.key: v.state for v in source.snapshot()} == {"ava": "closed"}
    source.close()


def views_at(whole, cursor: int) -> dict[str, tuple]:
    """Each breaker's view after `cursor` events, from the whole-file fold."""
    shown: dict[str, tuple] = {}
    for index, view in whole.changes:
        if index >= cursor:
            break
        shown[view.key] = view
    return {k: _card(v) for k, v in shown.items()}


def _card(view) -> tuple:
    return (view.state, view.count, view.opened_at, view.failed_probes, view.paged,
            view.probe_since)  # fmt: skip


def test_moving_anywhere_lands_on_the_whole_file_folds_views(demo_trace, monkeypatch):
    monkeypatch.setattr(pb, "CHECKPOINT", 64)  # many checkpoints in a small trace
    monkeypatch.setattr(pb, "WINDOW", 32)
    whole = replay_trace(demo_trace)
    player = play_trace(demo_trace)
    player.store.reach(float("inf"))
    wait_checkpointed(player)
    total = player.store.count()
    assert total == len(whole.events)
    for cursor in [*range(0, total, 97), total, *range(total - 1, 0, -131), 5, 700, 3]:
        player.move_to(cursor)
        assert {v.key: _card(v) for v in player.views()} == views_at(whole, cursor), cursor
    player.close()


def test_next_and_previous_change_land_where_a_whole_file_read_does(demo_trace):
    whole = replay_trace(demo_trace)
    walls = [e.wall for e in whole.events]
    changes = [i for i, e in enumerate(whole.events) if e.type.startswith(("circuit", "cred"))]
    source = ReplaySource(play_trace(demo_trace), label="replay")
    wait_indexed(source)
    for change in changes[:12]:
        source.next_change(1)
        assert source.cursor == bisect.bisect_right(walls, walls[change])
        assert {v.key: _card(v) for v in source.snapshot()} == views_at(whole, source.cursor)
    source.next_change(-1)
    assert {v.key: _card(v) for v in source.snapshot()} == views_at(whole, source.cursor)
    assert source.cursor == bisect.bisect_right(walls, walls[changes[10]])
    source.close()


def test_a_malformed_line_in_the_middle_is_said_and_the_replay_plays_past_it(tmp_path):
    big_trace(tmp_path / "bad.jsonl", 5000, bad_at=2500)
    source = ReplaySource(play_trace(tmp_path / "bad.jsonl"), label="replay")
    wait_indexed(source)
    said = [n.text for n in source._notices()]
    assert len(said) == 1 and "line 2500: not a trace line" in said[0]
    source.seek(source.end)
    assert source.cursor == source.store.count() == 4999
    source.close()


#: A first line whose time is not one: the recording's epoch is read from the next.
BAD_FIRST = b'{"seq":1,"t":0.0,"at":"nope","type":"call.denied","key":"ava","agent":"ava"}\n'
#: Lines whose head looks like the writer's and is not a trace line's, one of each way.
HOSTILE_HEADS = (
    b'{"seq":2,"t":1.2.3,"at":"2026-01-01T00:00:00.000Z","type":"x","key":"ava"}\n',
    b'{"seq":3,"t":1e999,"at":"2026-01-01T00:00:00.000Z","type":"x","key":"ava"}\n',
    b'{"seq":99999999999999999999,"t":1,"at":"2026-01-01T00:00:00.000Z","type":"x","key":"a"}\n',
    b'{"seq":5,"t":1,"at":"2026-01-01T00:00:00.000Z","type":"x","key":"a\\q"}\n',
    b'{"seq":6,"t":1,"at":"2026-01-01T00:00:00.000Z","type":"\xff","key":"ava"}\n',
)
#: Two chunks' worth without a line end.
ENDLESS = b'{"seq":7,"t":1' + b"0" * (2 << 20) + b"\n"


def test_lines_whose_head_only_looks_like_a_trace_line_are_said_and_skipped(tmp_path):
    big_trace(tmp_path / "t.jsonl", 3)
    good = (tmp_path / "t.jsonl").read_bytes().splitlines(keepends=True)
    lines = [BAD_FIRST, *HOSTILE_HEADS, good[0], *HOSTILE_HEADS, ENDLESS, *good[1:]]
    (tmp_path / "t.jsonl").write_bytes(b"".join(lines))
    index = TraceIndex.open(tmp_path / "t.jsonl")
    index.reach(float("inf"))  # the premise: the scan reached the end
    assert [index.event(n).seq for n in range(index.count())] == [1, 2, 3]
    assert len(index.problems) == 1 + 2 * len(HOSTILE_HEADS) + 1
    assert "line 1: not a trace line (Invalid isoformat string" in index.problems[0]
    assert "line 8: not a trace line" in index.problems[1 + len(HOSTILE_HEADS)]
    assert "line 13: longer than 1048576 bytes" in index.problems[-1]
    index.close()


async def test_the_replays_details_name_what_led_to_a_trip(demo_trace):
    source = ReplaySource(play_trace(demo_trace), label="replay")
    app = app_on(source)
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("n")  # the first trip
        await settle(pilot)
        detail = await open_screen(pilot, "enter", DetailScreen)
        trips = static_text(detail, "#detail-trips")
        assert "after: payments refused ×5" in trips
