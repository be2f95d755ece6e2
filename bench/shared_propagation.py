"""Part 2 of bench/shared.py: a trip's propagation, engine to engine; replica B is this file
run in a child process (`--replica URL`)."""

from __future__ import annotations

import contextlib
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.gateway import PYTHON
from bench.shared_setup import AGENT, LEASE, REPLY_SECONDS, TRIPS, failures, store
from breakerdeck.engine import events as ev
from breakerdeck.engine.clock import SystemClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.events import Event
from breakerdeck.engine.outcomes import SUCCESS
from breakerdeck.engine.policy import AgentPolicy


@contextlib.contextmanager
def _replica(url: str) -> Iterator[queue.Queue[str]]:
    """Replica B in a child process (this file, `--replica URL`): the lines it prints."""
    child = subprocess.Popen(
        [PYTHON, __file__, "--replica", url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdin is not None
    lines: queue.Queue[str] = queue.Queue()

    def read(stream: IO[str]) -> None:
        for line in stream:
            lines.put(line.strip())

    reader = threading.Thread(target=read, args=(child.stdout,))
    reader.start()
    try:
        if lines.get(timeout=30) != "ready":
            raise RuntimeError("replica B did not start")
        yield lines
    finally:
        child.stdin.close()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        reader.join(5)


def replica(url: str) -> None:
    """Replica B: on each relayed trip or reset of AGENT, an admit at once; prints
    `<type> <seen> <admitted> <allowed>` (CLOCK_MONOTONIC) until its standard input closes."""
    engine = Engine(AgentPolicy(), clock=SystemClock(), shared=store(url), instance="replica-b")
    said: queue.Queue[str | None] = queue.Queue()

    def listener(event: Event) -> None:
        if not event.relayed or event.key != AGENT or event.type not in (ev.TRIPPED, ev.RESET):
            return
        seen = time.monotonic()
        call = engine.enter(AGENT, AGENT, "up", "GET", LEASE)
        admission = engine.admit(call, LEASE)
        admitted = time.monotonic()
        if admission.allowed:
            engine.complete(call, SUCCESS, "ok", 200)
        said.put(f"{event.type} {seen!r} {admitted!r} {int(admission.allowed)}")

    def speak() -> None:
        while (line := said.get()) is not None:
            print(line, flush=True)

    engine.subscribe(listener)
    engine.restore()
    speaker = threading.Thread(target=speak)
    speaker.start()
    print("ready", flush=True)
    sys.stdin.read()
    engine.close()
    said.put(None)
    speaker.join()


@dataclass
class Propagation:
    seen_ms: list[float] = field(default_factory=list)
    refused_ms: list[float] = field(default_factory=list)
    not_refused: int = 0
    not_reopened: int = 0


def propagation(url: str, trips: int = TRIPS) -> Propagation:
    found = Propagation()
    engine = Engine(AgentPolicy(), clock=SystemClock(), shared=store(url), instance="replica-a")
    engine.restore()
    with engine, _replica(url) as lines:
        for n in range(trips + 5):  # the first five warm both replicas up, not counted
            failures(engine, AGENT, 4)
            start = time.monotonic()
            failures(engine, AGENT, 1)
            kind, seen, admitted, allowed = lines.get(timeout=REPLY_SECONDS).split()
            assert kind == ev.TRIPPED, kind
            if n >= 5:
                found.seen_ms.append((float(seen) - start) * 1e3)
                found.refused_ms.append((float(admitted) - start) * 1e3)
                found.not_refused += allowed == "1"
            engine.reset(AGENT, "bench", "next round")
            kind, _, _, allowed = lines.get(timeout=REPLY_SECONDS).split()
            assert kind == ev.RESET, kind
            found.not_reopened += allowed == "0"
    return found


if __name__ == "__main__":
    if sys.argv[1:2] == ["--replica"]:
        replica(sys.argv[2])
