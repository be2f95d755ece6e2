"""One call's entry: what every door holds from its first look at a call to the call's end.

The entry is lazy. It holds the admission (how and when the breaker let the call in) and the
attempts, and it draws its call number from the ledger only when something needs one: a line
(`call.completed`, `call.denied`), an Idempotency-Key, or the probe slot. With a listener
every call will have a line, so the engine draws it at entry (`Engine.enter`), in the order
calls arrive; with nobody reading, a healthy call never draws one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import final


@final
class Call:
    """One call's entry, from `Engine.enter` to its completion (`Engine.complete`)."""

    __slots__ = (
        "_draw",
        "_number",
        "admitted_as",
        "admitted_seq",
        "admitted_wall",
        "agent",
        "attempts",
        "credential_revoked",
        "deadline_seconds",
        "key",
        "platform",
        "tool",
        "would_deny",
    )

    def __init__(
        self,
        draw: Callable[[], int],
        key: str,
        agent: str,
        platform: str,
        tool: str,
        deadline: float,
        number: int = 0,
        revoked: bool = False,
    ) -> None:
        """`draw` hands out the next call number (the ledger's); `number`: one drawn already;
        `revoked`: the key's credential was paused at entry."""
        self._draw = draw
        self._number = number
        self.key = key
        self.agent = agent
        self.platform = platform
        self.tool = tool
        self.deadline_seconds = deadline
        self.attempts = 0
        self.admitted_wall: float | None = None
        self.admitted_as: str | None = None
        self.admitted_seq: int | None = None
        #: A shadow breaker let this call through though it would have refused it: the
        #: refusal's reason and retry-after, for its `call.would_deny` line.
        self.would_deny: tuple[str, float] | None = None
        #: The key's credential was revoked (paused until an operator restores it) when the
        #: call entered (`Entries.enter`): the doors refuse it before anything is sent. Read
        #: from the slot the entry looks up anyway, so no door asks the engine again.
        self.credential_revoked = revoked

    @property
    def number(self) -> int:
        """The call's number, drawn on first use."""
        number = self._number
        if not number:
            number = self._number = self._draw()
        return number

    @property
    def call_id(self) -> str:
        return call_id(self.number)


def call_id(number: int) -> str:
    """A call's number as lines and Idempotency-Keys print it."""
    return f"call-{number:06d}"
