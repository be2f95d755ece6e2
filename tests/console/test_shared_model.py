"""The board over replicas that share their breakers (DESIGN, "Replicas"): a key's cards from
replicas whose store answers are one card per state, and the header counts that breaker once.
The end-to-end story, over real feeds and a real Redis, is in test_shared_watch.py."""

from __future__ import annotations

from breakerdeck.console.board import Board
from breakerdeck.console.card import Thresholds
from tests.console.test_model import view

LABELS = ("replica-a", "replica-b", "replica-c")


def describe(ident: str) -> tuple[str, str | None]:
    index, _, key = ident.partition("\x1f")
    return key, LABELS[int(index)]


def board(pooled: set[int]) -> Board:
    """A board of three sources; those in `pooled` share an answering store."""
    return Board(
        Thresholds("agent"),
        describe,
        origin=lambda ident: ident.partition("\x1f")[0],
        pooled=lambda ident: int(ident.partition("\x1f")[0]) in pooled,
    )


def ident(index: int, key: str) -> str:
    return f"{index}\x1f{key}"


def test_pooled_replicas_in_one_state_show_the_key_as_one_card() -> None:
    shown = board({0, 1, 2})
    shown.load(view(ident(n, "ava"), "open", count=5) for n in range(3))
    [card] = shown.cards()
    assert (card.source, card.aggregate) == ("replica-a +2", "ava: open on 3 of 3")


def test_a_replica_deciding_alone_keeps_its_own_card() -> None:
    shown = board({0, 1})  # replica-c lost its store
    shown.load(view(ident(n, "ava"), "open", count=5) for n in range(3))
    assert [(c.source, c.aggregate) for c in shown.cards()] == [
        ("replica-a +1", "ava: open on 3 of 3"),
        ("replica-c", None),
    ]


def test_pooled_replicas_that_disagree_for_a_moment_show_each_state() -> None:
    shown = board({0, 1, 2})
    shown.load(
        [
            view(ident(0, "ava"), "open", count=5),
            view(ident(1, "ava"), "closed", count=4),  # the trip not relayed here yet
            view(ident(2, "ava"), "open", count=5),
        ]
    )
    assert [(c.word, c.source) for c in shown.cards()] == [
        ("OPEN", "replica-a +1"),
        ("CLOSED", "replica-b"),
    ]


def test_the_header_counts_a_pooled_breaker_once() -> None:
    shown = board({0, 1, 2})
    shown.load(
        [view(ident(n, "ava"), "open", count=5) for n in range(3)]
        + [view(ident(n, "bob")) for n in range(3)]
    )
    summary = shown.summary()
    assert (summary.count("OPEN"), summary.count("CLOSED")) == (1, 1)


def test_without_a_shared_store_each_source_keeps_its_card_and_count() -> None:
    shown = board(set())
    shown.load(view(ident(n, "ava"), "open", count=5) for n in range(3))
    assert [c.source for c in shown.cards()] == list(LABELS)
    assert shown.summary().count("OPEN") == 3
