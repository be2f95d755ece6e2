"""Issue 35: saved views in the command palette (`ctrl+p`), a context's name as outside text,
and the pulse screen's picture at 80x24. Contexts here are in-process engines on manual
clocks (what is drawn does not depend on a feed; `test_contexts` reads real feeds)."""

from __future__ import annotations

import json

from textual.command import CommandPalette

from breakerdeck.console.app import BreakerdeckApp
from breakerdeck.console.contexts import Context, View, builtin_views
from breakerdeck.console.refusals import Refusals
from breakerdeck.console.screens.dashboard import DashboardScreen
from breakerdeck.console.screens.detail import DetailScreen
from breakerdeck.console.screens.pulse import PulseScreen
from breakerdeck.console.source import InProcessSource
from breakerdeck.console.widgets.tabs import ContextTabs
from tests.console.conftest import OPERATOR, AgentWorld, press, running, settle
from tests.console.helpers import header_text, screen_text, status_text
from tests.console.test_no_color import LOUD, contrast, find, screen_segments
from tests.waiting import eventually

BILLING = View("billing", "agent:billing* state:open")


def contexts_app(*pairs: tuple[Context, AgentWorld], **kwargs) -> BreakerdeckApp:
    return BreakerdeckApp(
        [(context, InProcessSource(world.engine, label=context.name)) for context, world in pairs],
        operator=OPERATOR,
        tick_seconds=None,
        min_repaint_seconds=0,
        **kwargs,
    )


async def palette(pilot, query: str) -> str:
    """Open the palette, type `query`, and read the commands it lists."""
    await press(pilot, "ctrl+p")
    assert isinstance(pilot.app.screen, CommandPalette)
    await pilot.press(*query)
    await settle(pilot, 8)
    return screen_text(pilot.app)


async def test_the_palette_offers_the_saved_views_and_one_sets_the_filter(agent_world):
    await agent_world.trip_upstream("ava")
    views = {**builtin_views(), "billing": BILLING}
    async with running(agent_world.engine, views=views) as (app, pilot):
        listed = await palette(pilot, "view")
        for name in ("view: open", "view: held", "view: probing", "view: billing"):
            assert name in listed
        assert "filter: agent:billing* state:open" in listed
        await press(pilot, *": bil", "enter")
        dashboard = app.screen
        assert isinstance(dashboard, DashboardScreen)
        assert dashboard.filter_text == "agent:billing* state:open"
        assert "filter “agent:billing* state:open”" in status_text(app)


async def test_a_view_chosen_from_the_detail_screen_shows_the_filtered_dashboard(agent_world):
    await agent_world.trip_upstream("ava")
    async with running(agent_world.engine) as (app, pilot):
        await press(pilot, "enter")
        assert isinstance(app.screen, DetailScreen)
        await palette(pilot, "view: probing")
        await press(pilot, "enter")
        assert isinstance(app.screen, DashboardScreen)
        assert app.screen.filter_text == "state:half-open"


async def test_a_name_or_filter_from_the_files_is_shown_as_typed_never_as_markup(worlds):
    a, b = worlds("a"), worlds("b")
    await a.trip_upstream("ava")
    marked = Context("[b]prod[/b]\x1b[31m", ("ws://a:1",), read_only=True, color="red")
    other = Context("staging", ("ws://b:1",))
    views = {"[red]x[/]": View("[red]x[/]", "[b]ava[/b]")}
    app = contexts_app((marked, a), (other, b), views=views)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        shown = "[b]prod[/b]\\x1b[31m"
        assert header_text(app).startswith(f"{shown} read-only")
        assert f" 1 {shown} OPEN 1 HELD 0 " in str(app.screen.query_one(ContextTabs).content)
        listed = await palette(pilot, "x")
        assert "view: [red]x[/]" in listed and "filter: [b]ava[/b]" in listed
        await press(pilot, "escape")
        await press(pilot, "p")
        assert f"1 {shown[:11]}…" in screen_text(app)  # cut to its cell; the line under it:
        assert f"{shown}: ws://a:1" in screen_text(app)


async def test_the_palette_switches_contexts(worlds):
    a, b = worlds("a"), worlds("b")
    app = contexts_app((Context("prod", ("ws://a:1",)), a), (Context("staging", ("ws://b:1",)), b))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await palette(pilot, "context: stag")
        await press(pilot, "enter")
        assert app.active == 1
        assert header_text(app).startswith("staging")


async def test_one_palette_lists_the_screens_actions_views_and_contexts_once(worlds):
    a, b = worlds("a"), worlds("b")
    await a.trip_upstream("ava")
    prod = Context("prod", ("ws://a:1",), read_only=True)
    app = contexts_app((prod, a), (Context("staging", ("ws://b:1",)), b))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        actions = [command.title for command in app.get_system_commands(app.screen)]
        assert {"Details", "Export", "Pulse"} <= set(actions)
        # the contexts by name only (not "Context 1" too), and no write key in read-only prod
        assert not {"Context 1", "Context 2", "Reset", "reset"} & set(actions)
        for query in ("Export", "view: open", "context: staging"):
            assert query in await palette(pilot, query)
            await press(pilot, "escape")


async def test_e_exports_the_breaker_of_the_context_shown(worlds, tmp_path):
    a, b = worlds("a"), worlds("b")
    await a.trip_upstream("ava")
    await b.trip_upstream("bo")
    out = tmp_path / "out"
    out.mkdir()
    prod, staging = Context("prod", ("ws://a:1",)), Context("staging", ("ws://b:1",))
    app = contexts_app((prod, a), (staging, b), export_dir=out)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("2", "e")
        await eventually(lambda: any(out.glob("*.json")), "the export's files")
    document = json.loads(next(out.glob("*.json")).read_text())
    assert (document["key"], document["source"]) == ("bo", "staging")


async def test_a_console_without_contexts_has_no_tabs_and_no_pulse(agent_world):
    async with running(agent_world.engine) as (app, pilot):
        assert not app.screen.query_one(ContextTabs).display
        assert app.check_action("pulse", ()) is False
        await press(pilot, "p", "2")
        assert isinstance(app.screen, DashboardScreen) and app.active == 0


async def _pulse_story(a: AgentWorld, b: AgentWorld) -> None:
    """prod: ava open (then three calls refused), cy half-open; staging: bob open, later."""
    await a.trip_upstream("ava", "payments")
    await a.trip_upstream("cy", "crm")
    a.clock.advance(300)
    a.engine.poll()
    await a.trip_upstream("ava", "payments")
    await a.call("ava", "payments", 3)
    b.clock.advance(100)
    await b.trip_upstream("bob", "crm")
    await b.call("dee", "crm")


def test_the_pulse_at_80x24(snap_compare, worlds):
    a, b, c = worlds("a"), worlds("b"), worlds("c")
    app = contexts_app(
        (Context("prod", ("ws://gw-1:8765", "ws://gw-2:8765"), read_only=True, color="red"), a),
        (Context("staging", ("ws://staging:8765",), color="yellow"), b),
        (Context("dev", ("ws://localhost:8765",)), c),
    )

    async def run_before(pilot) -> None:
        await _pulse_story(a, b)
        await settle(pilot, 6)
        await press(pilot, "p")
        assert isinstance(app.screen, PulseScreen)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_refusals_per_minute_count_the_last_minute_of_the_sources_clock():
    refusals = Refusals()
    for wall in (100.0, 130.2, 130.7, 159.9):
        refusals.add(wall)
    assert refusals.per_minute(160.0) == 3  # 100 is a minute ago: out
    refusals.add(95.0)  # a replica's clock behind: counted in the newest second
    assert refusals.per_minute(160.0) == 4
    assert refusals.per_minute(230.0) == 0


async def test_with_no_color_a_red_context_name_still_reads(worlds, monkeypatch):
    """NO_COLOR greys every colour, red the darkest: the name is drawn without its colour."""
    monkeypatch.setenv("NO_COLOR", "1")
    a, b = worlds("a"), worlds("b")
    red = Context("prod", ("ws://a:1",), color="red")
    app = contexts_app((red, a), (Context("staging", ("ws://b:1",), color="red"), b))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        lines = screen_segments(app)
        assert contrast(find(lines, 1, "prod")) >= LOUD  # the header
        assert contrast(find(lines, 0, "staging")) >= LOUD  # a tab not shown
        await press(pilot, "p")
        lines = screen_segments(app)
        assert contrast(find(lines, 4, "staging")) >= LOUD  # its pulse row (not selected)
