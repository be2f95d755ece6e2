"""Issue 35: `watch --context`, one tab per context, over two real engines' feeds on loopback.

The console is built as `watch` builds it (`remote.watch_app`, from the command line and a
`contexts.toml` in the test's config dir), so the files, the tokens and the priming are the
ones a user's are. `prod` is read-only though its token is an operator's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from breakerdeck.console import cli
from breakerdeck.console.app import BreakerdeckApp
from breakerdeck.console.messages import FixRequested, ResetRequested, SteerRequested
from breakerdeck.console.remote import watch_app
from breakerdeck.console.screens.confirm import ConfirmScreen
from breakerdeck.console.screens.dashboard import DashboardScreen
from breakerdeck.console.screens.pulse import PulseScreen
from breakerdeck.console.widgets.tabs import ContextTabs
from breakerdeck.engine.feed.server import FeedServer
from tests.console.conftest import OPERATOR, AgentWorld
from tests.console.helpers import cards_text, header_text, screen_text, status_text
from tests.console.test_contexts_file import write
from tests.console.test_operator import resets
from tests.console.test_watch import OPERATOR_TOKEN, Replica, served, until


def tabs_text(app: BreakerdeckApp) -> str:
    return str(app.screen.query_one(ContextTabs).content)


def notices(app: BreakerdeckApp) -> str:
    return " | ".join(str(n.message) for n in app._notifications)


def contexts_file(config_home, prod: FeedServer, staging: FeedServer) -> None:
    """`prod` read-only and red, `staging` writable; both with the operator's token."""
    for name in ("prod", "staging"):
        write(config_home / f"{name}.token", OPERATOR_TOKEN + "\n")
    write(
        config_home / "contexts.toml",
        f'[contexts.prod]\nurls = ["{prod.url}"]\ntoken_file = "prod.token"\n'
        'read_only = true\ncolor = "red"\n\n'
        f'[contexts.staging]\nurls = ["{staging.url}"]\ntoken_file = "staging.token"\n',
    )
    write(config_home / "views.toml", '[views.ava]\nfilter = "ava"\n')


async def console(*argv: str) -> BreakerdeckApp:
    """The app `breakerdeck watch ARGV` would run (primed in a thread: `watch` runs its own
    loop for that, as a command does)."""
    app = await asyncio.to_thread(watch_app, cli.parse(["watch", *argv, "--operator", OPERATOR]))
    assert isinstance(app, BreakerdeckApp), app
    app.tick_seconds = None
    app.min_repaint_seconds = 0
    return app


@contextlib.asynccontextmanager
async def fleet(worlds, config_home) -> AsyncIterator[tuple[AgentWorld, AgentWorld]]:
    a, b = worlds("a"), worlds("b")
    await a.trip_upstream("ava")
    await b.call("bob", "crm")
    async with served(a, "gw-prod") as fa, served(b, "gw-staging") as fb:
        contexts_file(config_home, fa, fb)
        yield a, b


async def test_each_context_is_a_tab_with_its_counts_and_the_first_given_is_shown(
    worlds, config_home
):
    async with fleet(worlds, config_home):
        app = await console("--context", "prod", "--context", "staging")
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: "ava" in cards_text(app))
            assert header_text(app).startswith("prod read-only  OPEN 1")
            assert "bob" not in cards_text(app)
            tabs = tabs_text(app)
            assert " 1 prod OPEN 1 HELD 0 " in tabs and " 2 staging OPEN 0 HELD 0 " in tabs


async def test_number_keys_switch_tabs_and_each_keeps_its_own_dashboard(worlds, config_home):
    async with fleet(worlds, config_home) as (_, b):
        app = await console("--context", "prod", "--context", "staging")
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: "ava" in cards_text(app))
            await pilot.press("slash", *"ava", "enter")  # prod's filter
            await pilot.press("2")
            await until(pilot, lambda: "bob" in cards_text(app))
            assert header_text(app).startswith("staging  OPEN 0")
            assert "ava" not in cards_text(app)
            await b.trip_upstream("bob")  # news on the tab shown
            await until(pilot, lambda: "OPEN" in cards_text(app))
            await pilot.press("1")
            await until(pilot, lambda: header_text(app).startswith("prod"))
            assert "filter “ava”: 1 of 1" in status_text(app)
            assert " 2 staging OPEN 1 HELD 0 " in tabs_text(app)
            await pilot.press("9")  # no ninth tab: nothing happens
            assert app.active == 0


async def test_a_read_only_context_sends_no_write_whatever_the_token_and_says_so(
    worlds, config_home
):
    async with fleet(worlds, config_home) as (a, b):
        await b.trip_upstream("bob")
        app = await console("--context", "prod", "--context", "staging")
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: "ava" in cards_text(app))
            assert app.source.can_write(app.board.cards()[0].id)  # the token is an operator's
            assert app.screen.check_action("reset", ()) is False  # not offered, not in the footer
            assert "r Reset" not in screen_text(app).splitlines()[-1]
            for key in ("r", "R", "f", "o", "O", "m"):
                await pilot.press(key)
                await pilot.pause()
                assert isinstance(app.screen, DashboardScreen), key
            assert "prod is a read-only context" in notices(app)
            [card] = app.board.cards()
            for message in (ResetRequested(card), ResetRequested(card, every=True)):
                app.post_message(message)  # what a palette command or a click would post
            app.post_message(FixRequested(card))
            for what in ("hold", "release", "mode"):
                app.post_message(SteerRequested(card, what))
            await pilot.pause()
            assert isinstance(app.screen, DashboardScreen)
            assert app.screen.check_action("hold", ()) is False
            await pilot.press("enter")  # the detail screen's r
            await pilot.press("r")
            await pilot.pause()
            assert not isinstance(app.screen, ConfirmScreen)
            await pilot.press("escape")

            await pilot.press("2")  # the writable context beside it resets
            await until(pilot, lambda: "bob" in cards_text(app))
            await pilot.press("r")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("y")
            await until(pilot, lambda: len(resets(b.engine, "bob")) == 1)
        assert resets(a.engine, "ava") == []  # counted at prod's engine: nothing reached it
        assert a.engine.view("ava").state == "open"


async def test_a_lost_context_goes_stale_without_holding_up_the_other_and_comes_back(
    worlds, config_home
):
    a, b = worlds("a"), worlds("b")
    await a.call("ava", "crm")
    await b.call("bob", "crm")
    prod = Replica(a, "gw-prod")
    async with prod as fa, served(b, "gw-staging") as fb:
        contexts_file(config_home, fa, fb)
        app = await console("--context", "prod", "--context", "staging")
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: "ava" in cards_text(app))
            await prod.stop()  # prod's engine goes away
            await until(pilot, lambda: "STALE" in tabs_text(app), timeout=15)
            assert "STALE since" in header_text(app)
            await b.trip_upstream("bob")  # staging reads on meanwhile
            await until(pilot, lambda: " 2 staging OPEN 1 HELD 0 " in tabs_text(app))
            assert "gw-staging" not in notices(app)  # only prod was lost
            assert "prod: Lost gw-prod" in notices(app)

            await a.trip_upstream("ava")  # while nobody watches prod
            await prod.start()  # back on the same port
            await until(pilot, lambda: "STALE" not in tabs_text(app), timeout=30)
            await until(pilot, lambda: " 1 prod OPEN 1 HELD 0 " in tabs_text(app))
            assert "STALE" not in header_text(app)


async def test_the_pulse_shows_every_context_and_enter_goes_to_one(worlds, config_home):
    async with fleet(worlds, config_home) as (_, b):
        await b.trip_upstream("bob")
        app = await console("--context", "prod", "--context", "staging")
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: "ava" in cards_text(app))
            await b.call("bob", "crm", 3)  # refused while the console watches: its breaker is open
            await pilot.press("p")
            await until(pilot, lambda: isinstance(app.screen, PulseScreen))
            pulse = app.screen
            await until(pilot, lambda: pulse.rows[1].refused_per_minute == 3)
            rows = {row.name: row for row in pulse.rows}
            assert [row.number for row in pulse.rows] == [1, 2]
            assert rows["prod"].read_only and not rows["staging"].read_only
            assert rows["prod"].counts == (1, 0, 0, 0, 0)  # open, half-open, held, shadow, paused
            assert rows["staging"].counts == (1, 0, 0, 0, 0)
            assert rows["prod"].next_end is not None and rows["prod"].next_end[1] == "ava"
            await pilot.press("down", "enter")
            await until(pilot, lambda: isinstance(app.screen, DashboardScreen))
            assert app.active == 1
            assert "bob" in cards_text(app)
            await pilot.press("p", "1")  # a context's number on the pulse goes there too
            await until(pilot, lambda: isinstance(app.screen, DashboardScreen))
            assert app.active == 0


async def test_view_starts_every_tab_filtered(worlds, config_home):
    async with fleet(worlds, config_home):
        app = await console("--context", "prod", "--context", "staging", "--view", "ava")
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: "ava" in cards_text(app))
            assert "filter “ava”: 1 of 1" in status_text(app)
            await pilot.press("2")
            await until(pilot, lambda: header_text(app).startswith("staging"))
            assert "filter “ava”: 0 of 1" in status_text(app)
