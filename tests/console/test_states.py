"""Issue 31: the console's state words, colours and glyphs live in one table
(`console/states.py`); every screen reads it, so a new state is one row there."""

from __future__ import annotations

import ast
from pathlib import Path

from breakerdeck.console.states import (
    BY_TROUBLE,
    LISTED_WORDS,
    STATES,
    component_classes,
    look_of,
    state_css,
)
from breakerdeck.console.timeline import LEGEND
from breakerdeck.console.widgets.cards import CardList
from breakerdeck.console.widgets.log import LogLines

CONSOLE = Path(__file__).resolve().parents[2] / "console"
#: What only the table may spell: the word and the glyphs no other text uses.
TABLE_ONLY = ("HALF-OPEN", "▒", "‖", "≡")


def strings_outside_docstrings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if id(node) not in docstrings
    ]


def test_no_module_but_the_table_spells_a_state_word_or_glyph():
    spelled = {
        str(path.relative_to(CONSOLE))
        for path in CONSOLE.rglob("*.py")
        if path.name != "states.py"
        for text in strings_outside_docstrings(path)
        if any(word in text for word in TABLE_ONLY)
    }
    assert spelled == set()


def test_each_state_reads_without_colour():
    for field in ("name", "word", "glyph", "css"):
        values = [getattr(look, field) for look in STATES]
        assert len(set(values)) == len(values), field


def test_a_revoked_credential_reads_paused_whatever_its_breakers_state():
    assert [look_of(state, paused=True).word for state in ("closed", "open")] == ["PAUSED"] * 2
    assert look_of("half_open").word == "HALF-OPEN"
    assert look_of("held", paused=True).word == "PAUSED"


def test_a_held_breaker_reads_held_with_its_own_glyph_and_colour():
    held = look_of("held")
    assert (held.word, held.css, held.loud) == ("HELD", "held", True)
    others = [look for look in STATES if look is not held]
    assert held.glyph not in {look.glyph for look in others}
    assert held.colour not in {look.colour for look in others}


def test_every_state_has_its_colour_on_cards_and_in_the_log_and_trouble_reverses_without():
    assert component_classes("cards") <= CardList.COMPONENT_CLASSES
    assert component_classes("log") <= LogLines.COMPONENT_CLASSES
    cards = state_css("CardList", "cards", reversed_without_colour=True)
    for look in STATES:
        assert f"CardList > .cards--{look.css} {{ color: {look.colour}; }}" in cards
        assert (f"CardList:nocolor > .cards--{look.css}" in cards) == look.loud


def test_orders_and_the_legend_come_from_the_table():
    assert [look.word for look in BY_TROUBLE] == ["OPEN", "HALF-OPEN", "PAUSED", "HELD", "CLOSED"]
    assert LISTED_WORDS == ("PAUSED", "OPEN", "HALF-OPEN", "HELD", "CLOSED")
    assert LEGEND[: len(STATES)] == tuple((look.glyph, look.css) for look in STATES)
