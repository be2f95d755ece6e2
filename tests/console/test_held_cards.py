"""A held card says HELD, who holds it, why (as typed, never read as markup) and the time
left, counting down; a shadow card carries SHADOW beside the state it would be in, and its
would-be refusals are listed with the denied calls, marked."""

from __future__ import annotations

from breakerdeck.console.screens.confirm import ConfirmScreen
from breakerdeck.console.screens.detail import DetailScreen
from breakerdeck.engine import events as ev
from tests.console.conftest import make_app, open_screen, settle
from tests.console.helpers import cards_text, screen_text, static_text

#: Markup and a terminal escape in an operator's reason: shown as typed, never interpreted.
HOSTILE = "vendor [bold red]window[/] \x1b[31mred"


def card_lines(text: str, name: str) -> list[str]:
    """The title line of `name`'s card and the four lines under it."""
    lines = text.splitlines()
    at = next(n for n, line in enumerate(lines) if f" {name} " in f"{line} ")
    return [line.strip() for line in lines[at : at + 5]]


async def held_console(world, reason: str, seconds: float):
    """A console on ava's breaker, held by oncall:dana for `seconds` with `reason`."""
    await world.call("ava", "payments")
    world.engine.hold("ava", "oncall:dana", reason, seconds)
    return make_app(world.engine)


async def test_a_held_card_says_held_who_why_and_the_time_left(agent_world):
    app = await held_console(agent_world, HOSTILE, 30 * 60)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        title, until, who, *_ = card_lines(cards_text(app), "ava")
        assert title.startswith("▶ HELD") and title.endswith("30:00 left")
        assert until == "┃ until 12:30:00 · why: “vendor [bold red]window[/] \\x1b[31mred”"
        assert who.startswith("┃ → held by oncall:dana: every call is refused until release (O)")
        assert "cooldown" not in title and "cause ?" not in cards_text(app)


async def test_a_held_cards_time_left_counts_down_on_screen(agent_world):
    app = await held_console(agent_world, "vendor window", 30 * 60)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        agent_world.clock.advance(61)
        app.tick()
        await settle(pilot)
        assert "28:59 left" in screen_text(app)  # repainted by the tick, not only drawable


async def test_a_held_cards_details_say_who_why_and_the_time_left(agent_world):
    app = await held_console(agent_world, HOSTILE, 90)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        detail = await open_screen(pilot, "enter", DetailScreen)
        said = static_text(detail, "#detail-hint")
        assert "held by oncall:dana until 12:01:30 (01:30 left): vendor [bold red]window[/]" in said
        assert "\\x1b[31mred" in said


async def test_the_reset_dialog_says_a_reset_ends_the_hold(agent_world):
    app = await held_console(agent_world, "vendor window", 600)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        dialog = await open_screen(pilot, "r", ConfirmScreen)
        warning = static_text(dialog, "#confirm-warning")
        assert "held by oncall:dana until 12:10:00" in warning
        assert "A reset ends the hold" in warning
        assert "State: HELD, held by oncall:dana" in static_text(dialog, "#confirm-body")


async def test_a_shadow_card_says_shadow_beside_the_state_it_would_be_in(agent_world):
    await agent_world.call("ava", "payments")
    agent_world.engine.set_mode("ava", "shadow", "oncall:dana", "trial")
    await agent_world.trip_upstream("ava")
    await agent_world.call("ava", "payments")  # would be refused: goes through, written
    assert agent_world.engine.audit.query(key="ava", types=[ev.CALL_WOULD_DENY])
    app = make_app(agent_world.engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        title, *_, denied, _trips = card_lines(cards_text(app), "ava")
        assert title.startswith("▶ OPEN · SHADOW ava")
        assert denied.startswith("┃ denied 12:00:00 payments breaker open (would-be)")


async def test_a_mode_switch_leaves_an_open_cards_since_at_its_trip(agent_world):
    await agent_world.trip_upstream("ava")
    agent_world.clock.advance(60)
    agent_world.engine.set_mode("ava", "shadow", "oncall:dana", "trial")
    app = make_app(agent_world.engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        _title, counter, *_ = card_lines(cards_text(app), "ava")
        assert counter.endswith("since 12:00:00")


async def test_the_event_log_shows_the_hold_release_and_mode_with_who_and_why(agent_world):
    app = await held_console(agent_world, HOSTILE, 600)
    agent_world.engine.release("ava", "oncall:dana", "done", close=False)
    agent_world.engine.set_mode("ava", "shadow", "oncall:dana", "trial week")
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        shown = screen_text(app)
        # as typed, markup shown literally (the log's width cuts the rest)
        assert "HOLD    ava                by oncall:dana until 12:10:00: vendor [bol…" in shown
        assert "RELEASE ava                by oncall:dana" in shown
        assert "MODE    ava                enforce → shadow by oncall:dana: trial week" in shown
