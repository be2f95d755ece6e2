"""Text from outside (reasons, actors, keys, platform answers) made safe to show.

A reset reason typed by one operator reaches every watching terminal, log line and table: C0
and C1 control characters would drive those terminals (OSC, CSI) and forge log lines (newline),
and bidi overrides would reorder what the reader sees. They are shown escaped instead, the way
Python's `repr` writes them, so the reader still sees exactly what was sent.
"""

from __future__ import annotations

import re

#: C0 controls, DEL and C1 controls; the bidi embeddings, overrides and isolates; the line and
#: paragraph separators that some terminals and log viewers break on.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2028\u2029\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every control character and bidi override written as its escape."""
    return _UNSAFE.sub(_escaped, text)


def counted(number: int, noun: str) -> str:
    """`1 server`, `2 servers`: the count with its noun, singular for one."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
