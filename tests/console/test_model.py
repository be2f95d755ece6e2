"""The console's model: plain data, no screen."""

from __future__ import annotations

from console.model import Card, Failure, Thresholds, hint, mmss, sort_cards
from engine.engine import BreakerView


def view(key: str, state: str = "closed", *, agents=None, count=0, cause=None, **extra):
    fields = dict(
        key=key,
        agents=tuple(agents or (key,)),
        state=state,
        count=count,
        trip_cause=cause,
        opened_at=None,
        reopens_at=None,
        cooldown=300.0,
        failed_probes=0,
        paged=False,
        paused=False,
        last_failure_at=None,
    )
    fields.update(extra)
    return BreakerView(**fields)


def failure(platform: str, outcome: str) -> Failure:
    return Failure(1, 0.0, platform, outcome, "x", 502, None, True)


def test_trouble_comes_first_paged_open_half_open_paused_then_closed():
    cards = [
        Card("a-closed", view("a-closed")),
        Card("b-paused", view("b-paused", paused=True)),
        Card("c-half", view("c-half", "half_open")),
        Card("d-open", view("d-open", "open")),
        Card("e-paged", view("e-paged", "open", paged=True)),
        Card("f-counting", view("f-counting", count=2)),
    ]
    order = [card.agent for card in sort_cards(cards, "agent")]
    assert order == ["e-paged", "d-open", "c-half", "b-paused", "f-counting", "a-closed"]


def test_under_tool_cards_stay_grouped_by_agent_worst_group_first():
    shared = view("pay@prod", "open", agents=("ava", "bo"))
    cards = [
        Card("ava", view("crm@a", agents=("ava",))),
        Card("ava", shared),
        Card("bo", shared),
        Card("bo", view("mail@b", agents=("bo",))),
        Card("al", view("crm@al", agents=("al",))),
    ]
    order = [(card.agent, card.key) for card in sort_cards(cards, "tool")]
    assert order == [
        ("ava", "pay@prod"),
        ("ava", "crm@a"),
        ("bo", "pay@prod"),
        ("bo", "mail@b"),
        ("al", "crm@al"),
    ]


def test_the_counter_reads_as_the_design_writes_it():
    assert Thresholds("agent").counter(2) == "2 · auth 3 / upstream 5"
    assert Thresholds("tool").counter(2) == "2 · opens at 3"


def test_an_auth_trip_hints_reconnect_that_credential_on_its_platform():
    card = Card(
        "ava",
        view("ava", "open", count=3, cause="auth_failure"),
        failures=(failure("crm", "auth_failure"),) * 3,
    )
    assert hint(card) == "reauth_failed on crm: reconnect that credential, then reset"
    assert "credential (f), then reset (r)" in hint(card, keys=True, fixable=True)


def test_an_upstream_trip_hints_the_platform_or_the_path_is_down():
    card = Card(
        "ava",
        view("ava", "open", count=5, cause="upstream_failure"),
        failures=(failure("payments", "upstream_failure"),) * 5,
    )
    assert hint(card).startswith("payments or the path to it is down")


def test_the_filter_word_open_does_not_match_half_open():
    assert Card("a", view("a", "open")).matches("open")
    assert not Card("a", view("a", "half_open")).matches("open")
    assert Card("a", view("a", "half_open")).matches("half-open")


def test_countdowns_round_up_so_zero_means_due():
    assert mmss(299.2) == "05:00"
    assert mmss(0.5) == "00:01"
    assert mmss(0) == "00:00"
