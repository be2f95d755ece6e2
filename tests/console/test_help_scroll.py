"""At 80x24 the help is longer than the screen: the way out is its first line, and j/k (the
keys an operator's fingers already use) scroll it."""

from __future__ import annotations

from textual.containers import VerticalScroll

from breakerdeck.console.screens.help import CLOSE_LINE, HelpScreen, help_table
from tests.console.conftest import make_app, press, settle


async def open_help(agent_world, pilot) -> VerticalScroll:
    await settle(pilot)
    await press(pilot, "question_mark")
    assert isinstance(pilot.app.screen, HelpScreen)
    return pilot.app.screen.query_one("#help-box", VerticalScroll)


async def test_the_help_says_how_to_close_it_on_its_first_screen(agent_world):
    await agent_world.call("ava", "crm")
    app = make_app(agent_world.engine)
    async with app.run_test(size=(80, 24)) as pilot:
        box = await open_help(agent_world, pilot)
        assert box.max_scroll_y > 0  # longer than the screen: the point of the test
        assert box.scroll_y == 0
        first = help_table().columns[1]._cells[0]
        assert str(first) == CLOSE_LINE


async def test_j_and_k_scroll_the_help(agent_world):
    await agent_world.call("ava", "crm")
    app = make_app(agent_world.engine)
    async with app.run_test(size=(80, 24)) as pilot:
        box = await open_help(agent_world, pilot)
        await press(pilot, "j", "j", "j")
        assert box.scroll_y == 3
        await press(pilot, "k")
        assert box.scroll_y == 2


def test_the_close_line_names_the_scroll_keys():
    assert "j/k" in CLOSE_LINE
