"""Refused calls per minute: what the pulse shows of a context's callers' pain."""

from __future__ import annotations

from collections import deque

#: Refusals are counted over this many seconds of the source's clock.
REFUSAL_WINDOW = 60


class Refusals:
    """Refused calls (`call.denied`) in the last minute of the source's clock, counted per
    second so that a flood of them costs a counter, not a list."""

    def __init__(self) -> None:
        self._seconds: deque[list[int]] = deque()  # [second, refusals in it], oldest first

    def add(self, wall: float) -> None:
        """One refusal at `wall`. One older than the newest (a replica whose clock is behind
        another's) counts in the newest second."""
        seconds = self._seconds
        second = int(wall)
        if not seconds or second > seconds[-1][0]:
            seconds.append([second, 1])
        else:
            seconds[-1][1] += 1
        while seconds[0][0] <= seconds[-1][0] - REFUSAL_WINDOW:
            seconds.popleft()

    def per_minute(self, now: float) -> int:
        return sum(n for second, n in self._seconds if second > now - REFUSAL_WINDOW)

    def clear(self) -> None:
        self._seconds.clear()
