"""What every subject guards, and the pieces an adopter builds around a refusal.

The same trivial function and coroutine are guarded by every breaker; the same structured
answers (`engine.results`) are built after a refusal, so the figures differ only by what each
breaker does to admit, refuse and record.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from typing import Any

from breakerdeck.engine.results import HALT_INSTRUCTIONS

TOOL = "search"
BACKEND = "search-api"
AGENT = "agent-7"
KEY = f"{BACKEND}@default"
ALTERNATIVES = ("web_search",)
SLOW_SECONDS = 0.05
CALLERS = 50


class Boom(ConnectionError):
    """The guarded function's failure: an upstream error every breaker counts."""


def work(arg: Any = None) -> Any:
    return arg


async def awork(arg: Any = None) -> Any:
    return arg


def make_sink() -> deque[Any]:
    """Where denial events go: a bounded hand-off, as to an off-path writer."""
    return deque(maxlen=4096)


def open_reason(key: str, count: int, last: str) -> str:
    """The `reason` of a `circuit_open` result, worded as the harness words it."""
    return (
        f"{key} failed {count} times in a row; the last failure: {last}. "
        "Calls are paused until the cooldown ends."
    )


def halt_body(retry_after: float, cause: str = "breaker_auth_failure") -> dict[str, Any]:
    """The agent 403 `agent_halted` body, built directly (for breakers without our Admission)."""
    return {
        "error": "agent_halted",
        "reason": "circuit_breaker_open",
        "halt": {
            "state": "breaker_open",
            "recoverable_by": "time",
            "cause": cause,
            "retry_after_seconds": max(5, math.ceil(retry_after)),
            "instructions": HALT_INSTRUCTIONS,
        },
    }


def denial_event(key: str, retry_after: float) -> dict[str, Any]:
    """What a peer's adopter records for a refusal: our `call.denied`, as a plain dict."""
    return {
        "type": "call.denied",
        "key": key,
        "wall": time.time(),
        "reason": "circuit_breaker_open",
        "retry_after_seconds": round(retry_after, 3),
    }


class Reached:
    """Counts the callers that got into the guarded slow function (plain functions, as some
    decorators accept nothing else)."""

    def __init__(self) -> None:
        calls: list[int] = []
        self.calls = calls

        def dead_sync(arg: Any = None) -> Any:
            calls.append(1)
            time.sleep(SLOW_SECONDS)
            raise Boom("backend still down")

        async def dead_async(arg: Any = None) -> Any:
            calls.append(1)
            await asyncio.sleep(SLOW_SECONDS)
            raise Boom("backend still down")

        self.dead_sync = dead_sync
        self.dead_async = dead_async

    @property
    def count(self) -> int:
        return len(self.calls)


def slow_sync(arg: Any = None) -> Any:
    time.sleep(SLOW_SECONDS)
    return arg


async def slow_async(arg: Any = None) -> Any:
    await asyncio.sleep(SLOW_SECONDS)
    return arg


# -- the tables of bench/feed.py and bench/console.py ----------------------------------------

TABLE_HEAD = ("measure", "value", "ratio", "target", "met")
TABLE_WIDTHS = (42, 10, 9, 9, 4)


def table_header() -> list[str]:
    return [
        "  ".join(h.ljust(w) for h, w in zip(TABLE_HEAD, TABLE_WIDTHS, strict=True)),
        "  ".join("-" * w for w in TABLE_WIDTHS),
    ]


def table_row(label: str, value: str, ratio: str = "-", target: str = "", met: str = "") -> str:
    cells = (f"  {label}", value, ratio, target, met)
    return "  ".join(
        c.ljust(w) if i in (0, 3, 4) else c.rjust(w)
        for i, (c, w) in enumerate(zip(cells, TABLE_WIDTHS, strict=True))
    ).rstrip()


def yes(ok: bool) -> str:
    return "yes" if ok else "NO"
