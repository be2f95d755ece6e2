"""The filter's grammar: what `/`, a saved view and `--view` say, and which cards, table rows and
event-log rows it keeps.

A filter is words separated by spaces; every word must match. A bare word is looked for in the
breaker's agent, key, trip cause, platform and source (`pay` keeps `payments`), or names a state
(`open`, `half-open`, `paused`, `closed`; `open` is not half-open), or is `paged` or `shared`.
A `field:value` term matches that field's whole value (`agent:ava` is not `ava-2`), with `*`
standing for any run of characters (`agent:billing*`): `state:`, `agent:`, `platform:` and
`key:`. Case is ignored. `*` is the only wildcard: `?` and `[` are themselves (keys use them).

A term that cannot match anything (`state:bogus`, `colour:red`, `agent:`) is a problem, said
in words that name what would do; a filter with a problem keeps nothing, so the screen never
shows more than was asked for while saying why.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from breakerdeck.console.states import STATES

#: The fields a `field:value` term may name.
FIELDS = ("state", "agent", "platform", "key")

#: A state's spellings in a filter: `half-open`, `half_open`, `halfopen`.
_STATE_WORDS = {
    spelling: look.css
    for look in STATES
    for spelling in (look.css, look.name, look.css.replace("-", ""))
}
#: A word before `:` that looks like a field name (a key such as `api:v2` is matched as text
#: only when its prefix is not a plain word: `key:api:v2` says it is a key).
_FIELD_LIKE = re.compile(r"[a-z]+")


class Filterable(Protocol):
    """What a filter reads of a card or an event-log row."""

    @property
    def filter_state(self) -> str | None:
        """Its state's css word (`half-open`), or None (a log row that changed none)."""
        ...

    def filter_field(self, name: str) -> str | None:
        """The value of one of `FIELDS` other than `state` (None where it has none)."""
        ...

    @property
    def filter_text(self) -> str:
        """What a bare word is looked for in, lower case."""
        ...

    @property
    def filter_flags(self) -> frozenset[str]:
        """The bare words that match it whole: `paged`, `shared`."""
        ...


@dataclass(frozen=True, slots=True)
class Term:
    field: str | None  # None: a bare word
    value: str  # lower case
    pattern: re.Pattern[str] | None  # the value with `*` as a wildcard, where it has one

    def matches(self, item: Filterable) -> bool:
        if self.field == "state":
            return item.filter_state is not None and self._whole(item.filter_state)
        if self.field is not None:
            found = item.filter_field(self.field)
            return found is not None and self._whole(found.lower())
        state = item.filter_state
        if state is not None and _STATE_WORDS.get(self.value) == state:
            return True
        if self.value in item.filter_flags:
            return True
        if self.pattern is not None:
            return any(self.pattern.fullmatch(word) for word in item.filter_text.split())
        return self.value in item.filter_text

    def _whole(self, found: str) -> bool:
        if self.pattern is not None:
            return self.pattern.fullmatch(found) is not None
        if self.field == "state":
            return _STATE_WORDS.get(self.value) == found
        return self.value == found


@dataclass(frozen=True, slots=True)
class Filter:
    """A parsed filter: its text as typed, its terms, and what is wrong with it."""

    text: str
    terms: tuple[Term, ...] = ()
    problems: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.text.strip())

    def matches(self, item: Filterable) -> bool:
        if self.problems:
            return False
        return all(term.matches(item) for term in self.terms)

    def keep(self, items: Iterable[T]) -> list[T]:
        """The items it keeps, in their order (all of them when it is empty)."""
        listed = list(items)
        return [item for item in listed if self.matches(item)] if self else listed

    @property
    def problem(self) -> str | None:
        """Its problems in one line, for a notice or the empty list's text."""
        return "; ".join(self.problems) or None


T = TypeVar("T", bound=Filterable)

EVERYTHING = Filter("")


def parse(text: str) -> Filter:
    """`text` read as the grammar above; never raises (a bad term is a problem of the result)."""
    terms: list[Term] = []
    problems: list[str] = []
    for word in text.lower().split():
        field, colon, value = word.partition(":")
        if not colon or not _FIELD_LIKE.fullmatch(field):
            terms.append(_term(None, word))
            continue
        if field not in FIELDS:
            problems.append(f"{field}: is not a filter field (use {_listed(FIELDS)}:)")
            continue
        if not value and field != "state":
            problems.append(f"{field}: needs a value ({field}:billing*)")
            continue
        if field == "state":
            problem = _state_problem(value)
            if problem is not None:
                problems.append(problem)
                continue
        terms.append(_term(field, value))
    return Filter(text, tuple(terms), tuple(problems))


def _term(field: str | None, value: str) -> Term:
    pattern = None
    if "*" in value:
        pattern = re.compile(".*".join(re.escape(part) for part in value.split("*")))
    return Term(field, value, pattern)


def _state_problem(value: str) -> str | None:
    if not value:
        return f"state: needs a value ({_listed(look.css for look in STATES)})"
    if "*" in value:
        pattern = re.compile(".*".join(re.escape(part) for part in value.split("*")))
        if any(pattern.fullmatch(spelling) for spelling in _STATE_WORDS):
            return None
    elif value in _STATE_WORDS:
        return None
    return f"state:{value} is not a state (one of {_listed(look.css for look in STATES)})"


def _listed(words: Iterable[str]) -> str:
    shown = list(words)
    return ", ".join(shown[:-1]) + f" or {shown[-1]}" if len(shown) > 1 else "".join(shown)
