"""Where a card goes: trouble first, then by name; and several sources' cards of one key
grouped under one line."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from operator import itemgetter
from typing import Any

from breakerdeck.console.card import RANK_CLOSED, Card
from breakerdeck.console.states import LISTED_WORDS

#: How the board orders cards: trouble first, then by name.
SortKey = tuple[Any, ...]


def order_key(card: Card, kind: str, worst: int = RANK_CLOSED) -> SortKey:
    """A card's place, trouble first (closed ones with counted failures before healthy ones).
    Under `tool`, cards stay grouped by agent, groups ordered by their worst card: `worst` is
    the lowest rank among the agent's cards. Keys are unique (they end in agent and id)."""
    if kind == "agent":
        return (card.rank, -card.view.count, card.agent, card.key, card.id)
    return (worst, card.agent, card.rank, -card.view.count, card.key, card.id)


def sort_cards(cards: Iterable[Card], kind: str) -> list[Card]:
    cards = list(cards)
    worst: dict[str, int] = {}
    for card in cards:
        worst[card.agent] = min(worst.get(card.agent, RANK_CLOSED), card.rank)
    pairs = [(order_key(card, kind, worst[card.agent]), card) for card in cards]
    pairs.sort(key=BY_KEY)  # keys are unique: cards are never compared
    return [card for _, card in pairs]


#: A (sort key, card) pair's key: cards themselves are never compared.
BY_KEY = itemgetter(0)

_AGGREGATE_ORDER = LISTED_WORDS


def group_by_key(cards: list[Card], pooled: Callable[[str], bool] | None = None) -> list[Card]:
    """Several sources: a key's cards together, where its most troubled one sorts, and its
    first card carries the line "ava: open on 3 of 5 · closed on 2".

    Replicas whose breakers are one, through a shared store that answers (`pooled`, by id),
    show the key once per state: the first such card stands for the others ("replica-1 +2"),
    so three gateway replicas of an open agent take one card, not three. A replica that lost
    its store decides alone and keeps its own card, as does any that disagrees for a moment.
    """
    groups: dict[tuple[str, str], list[Card]] = {}
    for card in cards:
        groups.setdefault((card.agent, card.key), []).append(card)
    out: list[Card] = []
    for group in groups.values():  # dicts keep insertion order: the first card's place
        if len(group) == 1:
            out.extend(group)
            continue
        shown: list[Card] = []
        also: dict[str, tuple[int, int]] = {}  # state word -> (its card's place, more)
        for card in group:
            if pooled is not None and pooled(card.id):
                place, more = also.get(card.word, (len(shown), -1))
                also[card.word] = (place, more + 1)
                if more >= 0:
                    continue
            shown.append(card)
        for place, more in also.values():
            if more:
                shown[place] = replace(shown[place], source=f"{shown[place].source} +{more}")
        shown[0] = replace(shown[0], aggregate=aggregate_line(group))
        out.extend(shown)
    return out


def aggregate_line(group: list[Card]) -> str:
    words: dict[str, int] = {}
    for card in group:
        words[card.word] = words.get(card.word, 0) + 1
    total = len(group)
    parts = [
        f"{word.lower()} on {words[word]} of {total}" for word in _AGGREGATE_ORDER if word in words
    ]
    return f"{group[0].key}: " + " · ".join(parts)
