"""Issue 22: at 80 columns the dashboard's footer shows every key it offers whole (it ended
in a lone `x`, the demo keys cut off at the edge)."""

from __future__ import annotations

from textual.widgets._footer import FooterKey

from tests.console.conftest import running
from tests.console.test_operator import FakeControls


async def test_the_demo_footer_fits_80_columns_with_every_key_whole(tool_world):
    await tool_world.harness.call_tool("ava", "charge")
    async with running(tool_world.engine, controls=FakeControls()) as (app, _pilot):
        keys = list(app.screen.query(FooterKey))
        shown = [key for key in keys if key.region.width]
        assert [key.region.right <= 80 for key in shown] == [True] * len(keys)
        text = " ".join(f"{key.key_display} {key.description}" for key in shown)
        assert "d/u/x Faults" in text and "q Quit" in text and "f Fixed" in text
