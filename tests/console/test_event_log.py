"""Issue 22: where the terminal has room (120 columns or 40 rows), a live event log beside or
under the cards: transitions, probes, resets with who, pages, newest first, filtered like the
cards; at 80x24 it is not there and the cards keep every line they had."""

from __future__ import annotations

from breakerdeck.console.widgets.cards import CardList
from breakerdeck.console.widgets.log import EventLog, LogLines
from tests.console.conftest import OPERATOR, make_app, press, running, settle
from tests.console.test_snapshots import tell_the_story


def log_lines(app) -> list[str]:
    lines = app.screen.query_one(LogLines)
    return [lines.render_line(y).text.rstrip() for y in range(lines.size.height)]


def log_title(app) -> str:
    return str(app.screen.query_one("#log-title").content)


async def test_at_200x50_the_log_beside_the_cards_tells_the_story_newest_first(agent_world):
    app = make_app(agent_world.engine, speed=5.0)
    async with app.run_test(size=(200, 50)) as pilot:
        await tell_the_story(agent_world)
        await settle(pilot, 6)
        log = app.screen.query_one(EventLog)
        assert log.display and log.region.x > 0 and log.region.height > 40
        rows = [line for line in log_lines(app) if line]
        assert rows[:6] == [
            "12:15:00 TRIP    bo                 auth×3 (crm http_401), open 300s",
            "12:15:00 PAGE    ava                open through two cooldowns: on-call paged",
            "12:15:00 REOPEN  ava                probe failed (payments refused), open 300s",
            "12:15:00 HALF    cy                 cooldown over: the next call is the probe",
            "12:15:00 HALF    ava                cooldown over: the next call is the probe",
            "12:10:00 TRIP    cy                 upstream×5 (email refused), open 300s",
        ]
        reset = f"12:05:00 RESET   gus                by {OPERATOR}: vendor confirmed the fix"
        assert reset in rows
        assert "12:05:00 RECOVER fay                a call succeeded: closed" in rows


async def test_the_filter_keeps_the_log_rows_it_keeps_cards_for(agent_world):
    app = make_app(agent_world.engine, speed=5.0)
    async with app.run_test(size=(200, 50)) as pilot:
        await tell_the_story(agent_world)
        await settle(pilot, 6)
        total = len([line for line in log_lines(app) if line])
        await press(pilot, "slash", *"gus", "enter")
        rows = [line for line in log_lines(app) if line]
        assert [row.split()[1] for row in rows] == ["RESET", "TRIP"]
        assert log_title(app).endswith(f"filter “gus”: 2 of {total}")
        await press(pilot, "slash", "ctrl+u", *"closed", "enter")  # a state word: led to closed
        kinds = {line.split()[1] for line in log_lines(app) if line}
        assert kinds == {"RESET", "RECOVER"}


async def card_rows(agent_world, size: tuple[int, int]) -> tuple[bool, int]:
    """Whether the log shows at this size, and how many lines the cards get."""
    await agent_world.trip_upstream("ava")
    app = make_app(agent_world.engine)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        return app.screen.query_one(EventLog).display, app.screen.query_one(CardList).size.height


async def test_at_80x24_there_is_no_log_and_the_cards_keep_their_lines(agent_world):
    assert await card_rows(agent_world, (80, 24)) == (False, 22)


async def test_at_80x40_the_log_is_under_the_cards_which_keep_what_80x24_gave(agent_world):
    assert await card_rows(agent_world, (80, 40)) == (True, 22)


async def test_beside_narrow_cards_a_row_takes_two_lines(agent_world):
    await agent_world.trip_upstream("ava")
    async with running(agent_world.engine, size=(120, 30)) as (app, _pilot):
        first, second = log_lines(app)[:2]
        assert first == "12:00:00 TRIP    ava"
        assert second.startswith("  upstream×5 (payments refused), open")
