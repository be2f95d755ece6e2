"""How the console writes times, countdowns and causes: one way on every screen."""

from __future__ import annotations

from datetime import UTC, datetime


def clock_text(wall: float | None) -> str:
    """Simulated wall time as HH:MM:SS (UTC), the way every time on screen is written."""
    if wall is None:
        return "--:--:--"
    return datetime.fromtimestamp(wall, UTC).strftime("%H:%M:%S")


def mmss(seconds: float) -> str:
    whole = max(0, int(seconds + 0.999))  # round up: "00:00" only once it is due
    minutes, secs = divmod(whole, 60)
    return f"{minutes:02d}:{secs:02d}"


def cause_word(cause: str | None) -> str:
    """`auth_failure` -> `auth`: the short form used on cards."""
    if cause is None:
        return "?"
    return cause.removesuffix("_failure").removesuffix("_output")
