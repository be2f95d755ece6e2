"""The console's model: plain data, no screen."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from breakerdeck.console.board import Board
from breakerdeck.console.card import Card, Failure, Thresholds
from breakerdeck.console.filters import parse
from breakerdeck.console.hint import hint
from breakerdeck.console.ordering import group_by_key, sort_cards
from breakerdeck.console.words import mmss
from breakerdeck.engine.engine import BreakerView


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
    assert Thresholds("agent").counter(2) == "2 failures · trips at auth 3 / upstream 5"
    assert Thresholds("tool").counter(2) == "2 failures · trips at 3"


def test_an_auth_trip_hints_reconnect_that_credential_on_its_platform():
    card = Card(
        "ava",
        view("ava", "open", count=3, cause="auth_failure"),
        failures=(failure("crm", "auth_failure"),) * 3,
    )
    assert hint(card) == "reauth_failed on crm: reconnect that credential, then reset"
    assert "credential (f), then reset (r)" in hint(card, keys=True, fixable=True, resettable=True)


def test_a_hint_names_only_the_keys_its_console_offers():
    card = Card("ava", view("ava", "open", count=3, cause="auth_failure"))
    assert hint(card, keys=True) == "reauth_failed: reconnect that credential, then reset"
    assert hint(card, keys=True, resettable=True).endswith("then reset (r)")


def test_the_counter_says_what_it_counts_and_what_it_trips_at():
    assert Thresholds("agent").counter(1) == "1 failure · trips at auth 3 / upstream 5"
    assert Thresholds("agent").counter(7, approximate=True).startswith("≈7 failures ·")


def test_an_upstream_trip_hints_the_platform_or_the_path_is_down():
    card = Card(
        "ava",
        view("ava", "open", count=5, cause="upstream_failure"),
        failures=(failure("payments", "upstream_failure"),) * 5,
    )
    assert hint(card).startswith("payments or the path to it is down")


def test_the_filter_word_open_does_not_match_half_open():
    assert parse("open").matches(Card("a", view("a", "open")))
    assert not parse("open").matches(Card("a", view("a", "half_open")))
    assert parse("half-open").matches(Card("a", view("a", "half_open")))


def test_countdowns_round_up_so_zero_means_due():
    assert mmss(299.2) == "05:00"
    assert mmss(0.5) == "00:01"
    assert mmss(0) == "00:00"


STATES = st.sampled_from(["closed"] * 6 + ["open", "half_open"])
AGENTS = ("ava", "bo", "cy", "dee", "eve", "fay", "gus", "hal")


@st.composite
def some_views(draw, kind: str, source: str | None) -> BreakerView:
    """A breaker's view; under `tool` its key is shared by one or more agents."""
    index = draw(st.integers(0, 59))
    key = f"{index}\x1fk{index % 6}" if source else f"k{index}"
    agents = tuple(sorted(draw(st.sets(st.sampled_from(AGENTS), min_size=1, max_size=3))))
    return view(
        key,
        draw(STATES),
        agents=agents if kind == "tool" else (key,),
        count=draw(st.integers(0, 5)),
        paged=draw(st.integers(0, 9)) == 0,
        paused=draw(st.integers(0, 9)) == 0,
    )


def describe_two_sources(ident: str) -> tuple[str, str | None]:
    index, _, key = ident.partition("\x1f")
    return key, f"replica-{int(index) % 2}"


@pytest.mark.parametrize(("kind", "source"), [("agent", None), ("tool", None), ("agent", "x")])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_the_board_keeps_the_order_a_full_sort_gives(kind, source, data):
    """Re-placing only the changed ids gives the order sorting every card again would."""
    describe = describe_two_sources if source else None
    board = Board(Thresholds(kind), describe)
    views = {
        v.key: v for v in data.draw(st.lists(some_views(kind, source), min_size=20, max_size=40))
    }
    board.load(views.values())
    for _ in range(data.draw(st.integers(1, 6))):
        batch = data.draw(st.lists(some_views(kind, source), max_size=3))
        board.update(batch)
        views.update((v.key, v) for v in batch)
        every = []
        for v in views.values():
            key, label = describe(v.key) if describe else (v.key, None)
            agents = v.agents if kind == "tool" else (key,)
            name = key if label else None
            every += [Card(agent, v, name=name, source=label) for agent in agents]
        expected = sort_cards(every, kind)
        if source:
            expected = group_by_key(expected)
        assert [(c.ident, c.view, c.aggregate) for c in board.cards()] == [
            (c.ident, c.view, c.aggregate) for c in expected
        ]
        summary = board.summary()
        states = [("paused" if v.paused else v.state) for v in views.values()]
        assert tuple(summary.count(w) for w in ("OPEN", "HALF-OPEN", "PAUSED", "CLOSED")) == tuple(
            states.count(state) for state in ("open", "half_open", "paused", "closed")
        )
        named = describe or (lambda ident: (ident, None))
        assert summary.paged_keys == tuple(
            sorted({named(v.key)[0] for v in views.values() if v.paged and v.state != "closed"})
        )


def test_a_call_refused_for_the_probe_shows_a_probe_out_the_view_did_not_carry():
    from breakerdeck.console.widgets.card_lines import probe_words
    from breakerdeck.engine.events import Event

    board = Board(Thresholds("agent"))
    half = view("ava", "half_open", opened_at=0.0, failed_probes=0)
    board.load([half])
    board.apply([Event(1, "circuit_breaker.half_open", "ava", "ava", 300.0, {})])
    (card,) = board.cards()
    assert probe_words(card)[-1] == "next call is the probe"
    denied = {"call_id": "call-1", "platform": "crm", "reason": "probe_in_flight"}
    board.apply([Event(2, "call.denied", "ava", "ava", 312.0, denied)])
    (card,) = board.cards()
    assert probe_words(card)[-1] == "probe out by 00:05:12"
