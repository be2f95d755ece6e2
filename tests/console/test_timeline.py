"""Issue 22: a state timeline per breaker, drawn from the views the engine sent, with probes
and resets marked, distinct glyphs so it reads without colour, and its span shown."""

from __future__ import annotations

from breakerdeck.console.screens.detail import DetailScreen
from breakerdeck.console.timeline import span_text, strip
from tests.console.conftest import AgentWorld, press, running, settle
from tests.console.helpers import cards_text, screen_text, static_text


def glyphs(points, marks, start, step, count) -> str:
    return "".join(c.glyph for c in strip(points, marks, start=start, step=step, count=count))


def test_each_cell_shows_the_state_held_longest_in_it_or_the_mark_in_it():
    points = [(10.0, "closed"), (40.0, "open"), (100.0, "half_open"), (100.0, "open")]
    points += [(160.0, "half_open"), (175.0, "closed")]
    marks = [(100.0, "probe_failed"), (175.0, "probe_ok")]
    assert glyphs(points, marks, 0.0, 20.0, 10) == "··███✗██✓·"


def test_before_the_first_point_nothing_is_known_and_a_reset_outranks_a_probe():
    points = [(50.0, "open"), (80.0, "closed")]
    marks = [(81.0, "probe_ok"), (85.0, "reset")]
    assert glyphs(points, marks, 0.0, 20.0, 6) == "  ██R·"


def test_paused_reads_as_its_own_glyph():
    assert glyphs([(0.0, "closed"), (20.0, "paused")], [], 0.0, 10.0, 4) == "··‖‖"


def test_the_span_reads_in_the_largest_fitting_unit():
    assert [span_text(s) for s in (90, 720, 5400, 9000, 86400 * 3)] == [
        "90s",
        "12m",
        "90m",
        "2h30m",
        "3d",
    ]


async def trip_fail_recover(world: AgentWorld) -> None:
    """ava trips at 12:00:00; its probe at 12:05:00 fails; the one at 12:10:00 succeeds."""
    await world.trip_upstream("ava")
    world.clock.advance(300)
    world.engine.poll()
    await world.call("ava", "payments")  # the probe: still refused
    world.clock.advance(300)
    world.engine.poll()
    world.heal("payments")
    await world.call("ava", "payments")  # the probe: ok


async def avas_title_after_the_story(world: AgentWorld, *, later: float = 0) -> str:
    """ava's title line on screen, the console attached before the story; `later`: seconds
    after it, ticked across."""
    async with running(world.engine) as (app, pilot):
        await trip_fail_recover(world)
        await settle(pilot)
        if later:
            app.tick()
            world.clock.advance(later)
            app.tick()
            await settle(pilot)
        return next(line for line in screen_text(app).splitlines() if "ava" in line).rstrip()


async def test_the_cards_timeline_for_a_trip_a_failed_probe_and_a_recovery(agent_world):
    title = await avas_title_after_the_story(agent_world)
    # at 80 columns 17 cells of a minute, ending with the minute under way (12:10-12:11);
    # before the first call nothing is known
    assert title.endswith("-17m       █████✗████✓")


async def test_history_read_back_from_the_audit_log_draws_the_same_timeline(agent_world):
    await trip_fail_recover(agent_world)  # before the console attached
    async with running(agent_world.engine) as (app, _pilot):
        title = next(line for line in cards_text(app).splitlines() if "ava" in line)
        assert title.rstrip().endswith("-17m       █████✗████✓")


async def test_a_healthy_card_draws_no_timeline(agent_world):
    await agent_world.call("bo", "crm")
    async with running(agent_world.engine) as (app, _pilot):
        assert "-12m" not in cards_text(app)


async def test_the_detail_view_shows_the_whole_episode(agent_world):
    async with running(agent_world.engine) as (app, pilot):
        await trip_fail_recover(agent_world)
        agent_world.clock.advance(3600)  # an hour later, far outside the card's window
        await agent_world.call("bo", "crm")
        await settle(pilot)
        await press(pilot, "g", "enter")
        assert isinstance(app.screen, DetailScreen)
        text = static_text(app.screen, "#detail-timeline")
        assert "the last episode: 12:00:00 to 12:10:00 (10m; a cell is 10s)" in text
        # a cell before the trip (nothing known yet), the episode, a cell after it
        assert text.splitlines()[1] == " " + "█" * 30 + "✗" + "█" * 29 + "✓·"


async def test_without_colour_the_cells_keep_their_glyphs_and_are_never_reversed(
    agent_world, monkeypatch
):
    monkeypatch.setenv("NO_COLOR", "1")
    async with running(agent_world.engine) as (app, pilot):
        await trip_fail_recover(agent_world)
        await agent_world.trip_upstream("bo")
        await settle(pilot)
        assert "█✗" in screen_text(app) and "✓" in screen_text(app)
        update = app.screen._compositor.render_update(full=True)
        cells = [
            seg
            for line in update.strips
            for part in line
            for seg in part
            if seg.text and set(seg.text) <= set("·█▒‖✗✓R!")
        ]
        assert cells and not any(seg.style.reverse for seg in cells)


async def test_the_strip_slides_a_cell_with_the_tick_as_its_cell_passes(agent_world):
    title = await avas_title_after_the_story(agent_world, later=60)
    assert title.endswith("-17m      █████✗████✓·")


async def test_a_wide_card_has_half_minute_cells(agent_world):
    async with running(agent_world.engine, size=(110, 24)) as (app, pilot):
        await trip_fail_recover(agent_world)
        await settle(pilot)
        title = next(line for line in cards_text(app).splitlines() if "ava" in line).rstrip()
        assert title.endswith("-23m " + " " * 26 + "█" * 10 + "✗" + "█" * 9 + "✓")
