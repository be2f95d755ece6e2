"""The filter's grammar (`console.filters`): bare words as before, `*` globs, `field:value`
terms, every term must match, and a term that cannot match is said, never a crash."""

from __future__ import annotations

import pytest

from breakerdeck.console.card import Card
from breakerdeck.console.filters import parse
from breakerdeck.console.log_rows import LogRow
from breakerdeck.console.screens.table import TableScreen
from breakerdeck.console.widgets.cards import CardList
from tests.console.conftest import filter_by, press, running, settle
from tests.console.helpers import card_agents, cards_text
from tests.console.test_model import view


def card(agent: str, state: str = "closed", platform: str | None = None, **extra) -> Card:
    return Card(agent, view(agent, state, **extra), platform=platform)


BOARD = [
    card("billing-assistant", "open", "payments", cause="upstream_failure"),
    card("billing-bot", "half_open", "payments"),
    card("invoice-clerk", "open", "crm", cause="auth_failure"),
    card("ops-sentinel", "closed", "email"),
]


def kept(text: str) -> list[str]:
    return [c.agent for c in parse(text).keep(BOARD)]


def test_bare_words_match_as_before_anywhere_in_agent_key_cause_or_platform():
    assert kept("bill") == ["billing-assistant", "billing-bot"]
    assert kept("pay") == ["billing-assistant", "billing-bot"]
    assert kept("auth") == ["invoice-clerk"]


def test_a_bare_state_word_matches_that_state_only():
    assert kept("open") == ["billing-assistant", "invoice-clerk"]
    assert kept("half-open") == kept("halfopen") == kept("half_open") == ["billing-bot"]


def test_a_star_is_a_glob_over_a_whole_word():
    assert kept("bill*bot") == ["billing-bot"]
    assert kept("*clerk") == ["invoice-clerk"]
    assert kept("clerk*") == []


def test_field_terms_match_the_whole_value_unless_globbed():
    assert kept("agent:billing-bot") == ["billing-bot"]
    assert kept("agent:billing") == []
    assert kept("agent:billing*") == ["billing-assistant", "billing-bot"]
    assert kept("platform:payments") == ["billing-assistant", "billing-bot"]
    assert kept("key:ops-*") == ["ops-sentinel"]


def test_state_terms_take_every_spelling_and_globs():
    assert kept("state:open") == ["billing-assistant", "invoice-clerk"]
    assert kept("state:HALF_OPEN") == ["billing-bot"]
    assert kept("state:*open") == ["billing-assistant", "billing-bot", "invoice-clerk"]


def test_every_term_must_match():
    assert kept("agent:billing* state:open") == ["billing-assistant"]
    assert kept("state:open crm") == ["invoice-clerk"]


def test_case_is_ignored():
    assert kept("AGENT:Billing* State:Open") == ["billing-assistant"]


def test_only_the_star_is_a_wildcard():
    odd = card("a?b[c]", "open")
    assert parse("a?b[c]").matches(odd)
    assert parse("agent:a?b*").matches(odd)
    assert not parse("agent:axb*").matches(odd)


def test_a_key_with_a_colon_matches_as_text_when_its_prefix_is_not_a_word():
    odd = card("srv-1:9000", "open")
    assert parse("srv-1:9000").matches(odd)
    assert parse("key:srv-1:9000").matches(odd)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "state:bogus",
            "state:bogus is not a state (one of closed, open, half-open, paused or held)",
        ),
        ("colour:red", "colour: is not a filter field (use state, agent, platform or key:)"),
        ("agent:", "agent: needs a value (agent:billing*)"),
        ("state:", "state: needs a value (closed, open, half-open, paused or held)"),
    ],
)
def test_a_term_that_cannot_match_is_said_and_keeps_nothing(text, said):
    read = parse(f"bill {text}")
    assert read.problem == said
    assert read.keep(BOARD) == []


def test_held_is_a_state_the_design_names_and_keeps_no_breaker_yet():
    read = parse("state:held")
    assert read.problem is None
    assert read.keep(BOARD) == []


def test_an_empty_filter_keeps_everything():
    assert kept("") == kept("   ") == [c.agent for c in BOARD]


def test_the_event_log_rows_read_the_same_terms():
    row = LogRow(
        1, 0.0, "ava", "ava", "TRIP", "upstream×5", "open", "ava payments upstream_failure",
        agent="ava", key="ava", platform="payments",
    )  # fmt: skip
    assert parse("agent:av* state:open platform:payments").matches(row)
    assert not parse("state:closed").matches(row)


async def test_a_bad_term_typed_after_slash_says_why_on_the_list_and_in_a_notice(agent_world):
    await agent_world.call_once("ava", "bo")
    async with running(agent_world.engine) as (app, pilot):
        await filter_by(pilot, "state:bogus")
        assert app.screen.query_one(CardList).cards == []
        assert "state:bogus is not a state" in cards_text(app)
        said = [n.message for n in app._notifications]
        assert any("state:bogus is not a state" in text for text in said)
        await press(pilot, "escape")
        assert len(app.screen.query_one(CardList).cards) == 2


async def test_slash_takes_field_terms(agent_world):
    await agent_world.call_once("billing-a", "billing-b", "ops")
    await agent_world.trip_auth("billing-b")
    async with running(agent_world.engine) as (app, pilot):
        await filter_by(pilot, "agent:billing* state:open")
        assert card_agents(app) == ["billing-b"]


async def test_the_table_keeps_the_breakers_the_dashboards_filter_keeps(agent_world):
    await agent_world.call_once("billing-a", "billing-b", "ops")
    async with running(agent_world.engine) as (app, pilot):
        app.screen.set_filter("agent:billing*")
        await settle(pilot)
        await press(pilot, "t")
        assert isinstance(app.screen, TableScreen)
        assert [c.agent for c in app.screen.cards] == ["billing-a", "billing-b"]
        assert "filter “agent:billing*”: 2 of 3" in str(
            app.screen.query_one("#table-status").content
        )
