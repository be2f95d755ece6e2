"""Outside text reaches terminals and logs escaped, readable, and never interpreted."""

from breakerdeck.engine.text import printable


def test_terminal_escape_sequences_are_shown_not_sent():
    assert printable("\x1b]0;pwned\x07ok") == "\\x1b]0;pwned\\x07ok"


def test_a_newline_cannot_forge_a_second_line():
    assert printable("card rotated\nINFO reset by admin") == "card rotated\\x0aINFO reset by admin"


def test_c1_controls_and_bidi_overrides_are_escaped():
    assert printable("\x9b31m") == "\\x9b31m"
    assert printable("evil\u202etxt.exe") == "evil\\u202etxt.exe"


def test_ordinary_text_is_untouched():
    assert printable("Zoë rotated the card · 3× [bold]") == "Zoë rotated the card · 3× [bold]"
