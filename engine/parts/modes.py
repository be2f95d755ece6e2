"""A key's mode: `enforce`, or `shadow` (DESIGN, "Operator control"), from its configuration
and an operator's write, once for every door.

The configuration gives each key a mode (`Engine(mode=...)` as the default, a door's table or
`Tool(mode=...)` per key); an operator's `shadow` or `enforce` wins over it until the
configuration's value for that key changes, and is kept across restarts with the verdict.
"""

from __future__ import annotations

from typing import Final

from breakerdeck.engine.parts.keys import Slot

MODES: Final = ("enforce", "shadow")


def checked(mode: str) -> str:
    """`mode` if it is one, else a clear error naming the two."""
    if mode not in MODES:
        raise ValueError(f"mode must be 'enforce' or 'shadow', not {mode!r}")
    return mode


def effective_mode(slot: Slot) -> str:
    """The mode the call path reads: the operator's, while the configuration's value is still
    the one it was written over; else the configuration's."""
    chosen = slot.chosen
    if chosen is not None and chosen[1] == slot.configured:
        return chosen[0]
    return slot.configured


def configure(slot: Slot, mode: str) -> None:
    """The configuration's value for the key (under its lock): an operator's write made over
    another value is dropped."""
    slot.configured = checked(mode)
    chosen = slot.chosen
    if chosen is not None and chosen[1] != slot.configured:
        slot.chosen = None
    slot.mode = effective_mode(slot)
