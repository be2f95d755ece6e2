"""Python and C calls per call on the paths adopters call, counted with `sys.setprofile`.

Timings on a shared 2-core machine move with its load; how many calls a call makes does not.
Each figure is every `call` and `c_call` event the profiler sees during one call (after
warm-up calls of the same subject), built as `bench/shell.py` builds its rows: with no state
dir, and on a state dir restored as docs/engine.md sets it up. The wrapper that makes the
call is counted, and a coroutine is driven by hand (one `send`), so no event loop frame is.
`.venv/bin/python bench/calls.py`, or `bench/run.py --only calls`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
import tempfile
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import AGENT, BACKEND, TOOL, awork, work
from bench.shell import (
    PLACES,
    _bus,
    _engine,
    _guarded,
    _guarded_async,
    _inside,
    _LeastWatchedGuard,
    _new_keys,
    _trip,
    interleaved,
)
from breakerdeck.engine.harness import Harness, Tool

WARM = 5


def _profiled(once: Callable[[], object]) -> int:
    """The call events of one call of `once`, after `WARM` unprofiled ones."""
    for _ in range(WARM):
        once()
    seen = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal seen
        if event in ("call", "c_call"):
            seen += 1

    sys.setprofile(profile)
    once()
    sys.setprofile(None)
    return seen - 1  # the call of setprofile(None)


def _stepped(make: Callable[[], Awaitable[Any]]) -> Callable[[], object]:
    """One awaited call driven by hand: a healthy call on these paths never suspends."""

    def once() -> object:
        coroutine = make()
        assert asyncio.iscoroutine(coroutine)
        try:
            coroutine.send(None)
        except StopIteration as done:
            return done.value
        coroutine.close()
        raise RuntimeError("the call suspended: it cannot be counted by stepping it")

    return once


def rows() -> list[tuple[str, int]]:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)

    async def count(make: Callable[[], Awaitable[Any]]) -> int:
        return _profiled(_stepped(make))  # inside a running loop, as the doors call

    beside: list[list[tuple[str, int]]] = []
    with tempfile.TemporaryDirectory(prefix="bench-calls-") as tmp, contextlib.ExitStack() as open_:
        dirs = itertools.count()
        for place in PLACES:

            def engine(place: str = place, listener: bool = False) -> Any:
                state_dir = f"{tmp}/state-{next(dirs)}" if place else None
                return open_.enter_context(_engine(listener, loop, state_dir))

            subject = engine()
            asyn = _guarded_async(subject, awork)
            harness = Harness(engine())
            harness.register(Tool(name=TOOL, backend=BACKEND, attempts=1, function=awork))
            call_tool = partial(harness.call_tool, AGENT, TOOL)
            refusing = engine()
            _trip(refusing)
            beside.append(
                [
                    (f"Engine.guard, sync{place}", _profiled(_guarded(subject, work))),
                    (
                        f"Engine.guard, sync, EventBus listener{place}",
                        _profiled(_guarded(engine(listener=True), work)),
                    ),
                    (f"Engine.guard, async{place}", loop.run_until_complete(count(asyn))),
                    (f"Harness.guard{place}", _profiled(harness.guard(TOOL)(work))),
                    (f"Harness.call_tool{place}", loop.run_until_complete(count(call_tool))),
                    (
                        f"a new key's first call, Engine.guard{place}",
                        _profiled(_new_keys(engine())),
                    ),
                    (
                        f"refusal with its result, Engine.guard{place}",
                        _profiled(_guarded(refusing, work)),
                    ),
                ]
            )
        least = _LeastWatchedGuard(_bus(engine(), loop).offer)
        floor = ("(reference) the least a watched line needs", _profiled(_inside(least, work)))
    loop.close()
    return [*interleaved(beside), floor]


def render(found: list[tuple[str, int]]) -> str:
    lines = ["calls per call (sys.setprofile: Python and C call events; deterministic)"]
    lines += [f"  {title:56}  {count:5d}" for title, count in found]
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(rows()))
