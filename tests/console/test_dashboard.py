"""The dashboard against a real engine on a manual clock: cards, countdowns, sorting, filter."""

from __future__ import annotations

import time

from breakerdeck.console.app import BoardChanged
from breakerdeck.console.screens.detail import DetailScreen
from breakerdeck.console.widgets.cards import CardList
from breakerdeck.engine import events as ev
from tests.console.conftest import filter_by, make_app, press, running, settle
from tests.console.helpers import card_agents, cards_text, countdown_of, header_text


async def test_a_tripped_breaker_shows_open_and_its_countdown(agent_world):
    await agent_world.call("bo", "crm")
    app = make_app(agent_world.engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await agent_world.trip_upstream("ava")
        await settle(pilot)
        assert agent_world.engine.view("ava").state == "open"
        text = cards_text(app)
        assert countdown_of(text, "ava") == "05:00"
        assert "5 failures · trips at auth 3 / upstream 5" in text
        assert "OPEN 1" in header_text(app)


async def test_the_countdown_decreases_as_the_clock_advances(agent_world):
    await agent_world.trip_upstream("ava")
    async with running(agent_world.engine) as (app, pilot):
        assert "probe in 05:00" in cards_text(app)
        agent_world.clock.advance(61)
        app.tick()
        await settle(pilot)
        assert "probe in 03:59" in cards_text(app)
        agent_world.clock.advance(238)
        app.tick()
        await settle(pilot)
        assert "probe in 00:01" in cards_text(app)


async def test_the_tick_repaints_only_visible_open_cards(agent_world):
    for index in range(30):
        await agent_world.call(f"agent-{index:02d}", "crm")
    await agent_world.trip_upstream("ava")
    async with running(agent_world.engine) as (app, _pilot):
        assert app.screen.query_one(CardList).tick() == 1


async def test_half_open_then_recovery_show_on_the_card(agent_world):
    await agent_world.trip_upstream("ava")
    async with running(agent_world.engine) as (app, pilot):
        agent_world.clock.advance(300)
        agent_world.engine.poll()
        await settle(pilot)
        assert agent_world.engine.view("ava").state == "half_open"
        assert "HALF-OPEN   ava" in cards_text(app)
        assert "HALF-OPEN 1" in header_text(app)
        agent_world.heal("payments")
        await agent_world.call("ava", "payments")
        await settle(pilot)
        assert agent_world.engine.view("ava").state == "closed"
        text = cards_text(app)
        assert "CLOSED      ava" in text
        assert "upstream×5 → recovered" in text


async def test_denied_calls_show_time_platform_and_reason(agent_world):
    await agent_world.trip_upstream("ava")
    app = make_app(agent_world.engine)
    async with app.run_test(size=(80, 24)) as pilot:
        agent_world.clock.advance(5)
        assert await agent_world.call("ava", "crm") == [403]
        await settle(pilot)
        assert "denied 12:00:05 crm breaker open" in cards_text(app)


async def test_trouble_comes_first(agent_world):
    await agent_world.call_once("aaron", "abby", "zed")
    await agent_world.trip_upstream("zed")
    async with running(agent_world.engine) as (app, _pilot):
        assert card_agents(app) == ["zed", "aaron", "abby"]


async def test_a_paged_breaker_shouts_in_the_header(agent_world):
    await agent_world.trip_upstream("ava")
    app = make_app(agent_world.engine)
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(2):  # two failed probes in a row: the page
            agent_world.clock.advance(300)
            agent_world.engine.poll()
            await agent_world.call("ava", "payments")
        await settle(pilot)
        assert agent_world.engine.view("ava").paged
        assert "!! PAGED 1: ava !!" in header_text(app)
        assert "PAGED" in cards_text(app).splitlines()[0]


async def test_at_80_columns_a_long_paged_name_never_pushes_the_counts_off(agent_world):
    agent = "billing-assistant-for-the-emea-region"
    await agent_world.trip_upstream(agent)
    app = make_app(agent_world.engine, speed=5.0)
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(2):
            agent_world.clock.advance(300)
            agent_world.engine.poll()
            await agent_world.call(agent, "payments")
        await settle(pilot)
        header = header_text(app)
        assert "!! PAGED 1 !!" in header
        assert "CLOSED" in header and "sim ×5" in header


async def test_slash_filters_by_agent(agent_world):
    await agent_world.call_once("ava", "bo", "cy")
    async with running(agent_world.engine) as (app, pilot):
        await press(pilot, "slash", "b", "o")
        assert card_agents(app) == ["bo"]
        await press(pilot, "enter")
        assert "filter “bo”: 1 of 3" in str(app.screen.query_one("#status").content)
        assert app.screen.query_one(CardList).has_focus


async def test_slash_filters_by_state_and_escape_clears(agent_world):
    await agent_world.call_once("ava", "bo", "cy")
    await agent_world.trip_auth("cy")
    async with running(agent_world.engine) as (app, pilot):
        await filter_by(pilot, "open")
        assert card_agents(app) == ["cy"]
        await press(pilot, "escape")
        assert len(app.screen.query_one(CardList).cards) == 3


async def test_j_and_k_move_the_selection(agent_world):
    await agent_world.call_once("ava", "bo", "cy")
    async with running(agent_world.engine) as (app, pilot):
        cards = app.screen.query_one(CardList)
        assert cards.selected == ("ava", "ava")
        await pilot.press("j", "j")
        assert cards.selected == ("cy", "cy")
        await pilot.press("k")
        assert cards.selected == ("bo", "bo")
        await pilot.press("down")
        assert cards.selected == ("cy", "cy")
        assert "▶ CLOSED      cy" in cards_text(app)


async def test_enter_opens_the_detail_screen_with_audit_rows_newest_first(agent_world):
    await agent_world.trip_auth("ava")
    async with running(agent_world.engine) as (app, pilot):
        await press(pilot, "enter")
        screen = app.screen
        assert isinstance(screen, DetailScreen)
        rows = agent_world.engine.audit.query(key="ava")
        table = screen.query_one("#audit")
        assert table.row_count == len(rows) == 4
        cells = [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]
        seqs = [int(row[0]) for row in cells]
        assert seqs == sorted(seqs, reverse=True)
        assert cells[0][2] == "tripped"
        assert [cells[i][2] for i in (1, 2, 3)] == [ev.CALL_FAILED] * 3


async def test_only_visible_cards_are_drawn(agent_world):
    engine = agent_world.engine
    for index in range(2000):
        call = engine.enter(
            key=f"agent-{index:04d}",
            agent=f"agent-{index:04d}",
            platform="crm",
            tool="crm",
            deadline_seconds=30,
        )
        del call
    async with running(engine) as (app, pilot):
        cards = app.screen.query_one(CardList)
        assert len(cards.cards) == 2000
        assert cards.virtual_size.height == 2000 * 3
        drawn = []
        original = cards._draw
        cards._draw = lambda card, *rest: drawn.append(card.agent) or original(card, *rest)
        cards._cache.clear()
        cards.refresh()
        await settle(pilot)
        assert 0 < len(set(drawn)) <= 8


async def test_a_flood_that_overflows_the_buffer_resyncs_from_a_snapshot(agent_world):
    from breakerdeck.console.app import BreakerdeckApp
    from breakerdeck.console.source import InProcessSource
    from tests.console.conftest import OPERATOR

    source = InProcessSource(agent_world.engine, buffer=2)
    app = BreakerdeckApp(source, operator=OPERATOR, tick_seconds=None, min_repaint_seconds=0)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.resyncs == 1
        await agent_world.trip_upstream("ava")  # 6 events without yielding: more than 2
        await settle(pilot)
        assert app.resyncs == 2
        assert countdown_of(cards_text(app), "ava") == "05:00"
        assert "trips  12:00:00 upstream×5 → open" in cards_text(app)  # from the audit log


async def test_a_stale_source_says_so_in_the_header(agent_world):
    await agent_world.call("ava", "crm")
    async with running(agent_world.engine) as (app, pilot):
        app.source.stale_since = agent_world.clock.wall()
        app.tick()
        await settle(pilot)
        assert "STALE since 12:00:00" in header_text(app)


async def test_accelerated_time_is_shown_with_its_factor(agent_world):
    await agent_world.call("ava", "crm")
    async with running(agent_world.engine, speed=5.0) as (app, _pilot):
        assert "simulated time ×5 12:00:00" in header_text(app)


async def test_the_ansi_dark_theme_can_be_chosen(agent_world, monkeypatch):
    monkeypatch.setenv("BREAKERDECK_THEME", "ansi-dark")
    async with running(agent_world.engine) as (app, _pilot):
        assert app.theme == "ansi-dark"


async def test_the_filter_also_matches_the_platform(agent_world):
    app = make_app(agent_world.engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await agent_world.call("ava", "crm")  # the card learns its platform from the calls
        await agent_world.call("bo", "email")
        await settle(pilot)
        await filter_by(pilot, "email")
        assert card_agents(app) == ["bo"]


async def test_the_footer_is_redrawn_only_when_a_key_offer_changes(agent_world):
    await agent_world.trip_upstream("ava")
    await agent_world.call("bo", "crm")
    async with running(agent_world.engine) as (app, pilot):
        screen = app.screen
        refreshed = []
        original = screen.refresh_bindings
        screen.refresh_bindings = lambda: refreshed.append(1) or original()
        await agent_world.call("bo", "crm", 3)  # another card: the offer on ava is unchanged
        await settle(pilot)
        assert "0 failures" in cards_text(app) and refreshed == []
        agent_world.clock.advance(300)
        agent_world.engine.poll()
        agent_world.heal("payments")
        await agent_world.call("ava", "payments")  # ava closes: r is no longer offered
        await settle(pilot)
        assert "CLOSED      ava" in cards_text(app)
        assert refreshed == [1]
        assert screen.check_action("reset", ()) is None


async def test_news_while_a_repaint_is_due_waits_for_it(agent_world):
    app = make_app(agent_world.engine)
    app.min_repaint_seconds = 60
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        repaints = []
        app._repaint = lambda: repaints.append(1)
        app._repainted_at = time.monotonic()
        app.post_message(BoardChanged())
        await settle(pilot)
        assert app._repaint_timer is not None and repaints == []
        app._repainted_at -= 61  # the repaint fell due; the busy loop has not run its timer yet
        app.post_message(BoardChanged())
        await settle(pilot)
        assert repaints == []  # the timer repaints, once


async def test_the_selection_follows_its_card_when_the_order_changes(agent_world):
    await agent_world.call_once("ava", "bo", "cy")
    async with running(agent_world.engine) as (app, pilot):
        await pilot.press("j")
        cards = app.screen.query_one(CardList)
        assert cards.selected_index == 1
        await agent_world.trip_upstream("cy")  # cy moves to the top, bo one place down
        await settle(pilot)
        assert [c.agent for c in cards.cards] == ["cy", "ava", "bo"]
        assert cards.selected == ("bo", "bo") and cards.selected_index == 2
        assert "▶ CLOSED      bo" in cards_text(app)


async def test_a_held_breaker_shows_held_on_its_card_and_in_the_header_only_while_held(
    agent_world,
):
    await agent_world.call("ava", "crm")
    async with running(agent_world.engine) as (app, pilot):
        assert "HELD" not in header_text(app)  # an operator's state: not counted at 0
        agent_world.engine.hold("ava", "ops", "vendor maintenance", 1800)
        await settle(pilot)
        assert "HELD" in cards_text(app).split("ava")[0].splitlines()[-1]
        assert "HELD 1" in header_text(app)
        agent_world.engine.release("ava", "ops", close=True)
        await settle(pilot)
        assert "HELD" not in header_text(app)
