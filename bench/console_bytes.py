"""Bytes the console writes to a real terminal when little happens (issue 10, item 11).

Run from the repository root: `.venv/bin/python bench/console_bytes.py`. Printed, never
asserted. Each case starts the console in a child process on a real pseudo-terminal (`pty`)
sized 80x24, waits for it to settle, then reads the master side for `SECONDS` seconds and
counts the bytes: what an SSH link would carry.

- "5 open countdowns": this script's `--child` mode: an in-process engine on the system clock
  with five agents tripped (five counted upstream failures each) and nothing else happening;
  the console is `BreakerdeckApp` over `InProcessSource`, as `breakerdeck demo` builds it.
  Only the five countdowns move, once a second. Target: at most 2 KB/s.
- "over 2 contexts" (issue 35): the same five, three in one context and two in another, as
  `watch --context prod --context staging` shows them: the tabs' line and the header's
  context name beside the cards. Target: the same 2 KB/s.
- "breakerdeck demo": the demo as a user starts it (its default scenario at speed 5), for
  comparison: its simulated agents keep calling, so cards really change.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from breakerdeck.engine.engine import Engine

SIZE = (80, 24)
SETTLE_SECONDS = 3.0
SECONDS = 10.0
TARGET_BYTES_PER_S = 2048
OPEN = 5
ROOT = Path(__file__).resolve().parent.parent


def child(contexts: bool) -> None:
    """The console over five open breakers and nothing else (runs on the pty); with
    `contexts`, split over two contexts (`watch --context a --context b`), three and two."""
    from breakerdeck.console.app import BreakerdeckApp
    from breakerdeck.console.contexts import Context
    from breakerdeck.console.source import InProcessSource

    with tempfile.TemporaryDirectory(prefix="breakerdeck-bytes-") as state_dir:
        if not contexts:
            engine = _tripped(Path(state_dir), range(OPEN))
            engines = [engine]
            app = BreakerdeckApp(InProcessSource(engine, label="bench"), operator="bench")
        else:
            engines = [
                _tripped(Path(state_dir) / "a", range(3)),
                _tripped(Path(state_dir) / "b", range(3, OPEN)),
            ]
            names = (("prod", "red"), ("staging", "yellow"))
            tabs = [
                (Context(name, (f"ws://{name}:8765",), color=color), InProcessSource(engine))
                for (name, color), engine in zip(names, engines, strict=True)
            ]
            app = BreakerdeckApp(tabs, operator="bench")
        try:
            app.run()
        finally:
            for engine in engines:
                engine.close()


def _tripped(state_dir: Path, agents: range) -> Engine:
    """An engine on the system clock with these agents tripped (five counted failures each)."""
    from breakerdeck.engine.clock import SystemClock
    from breakerdeck.engine.engine import Engine
    from breakerdeck.engine.outcomes import Outcome, OutcomeClass
    from breakerdeck.engine.policy import AgentPolicy

    upstream = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="connection refused")
    engine = Engine(AgentPolicy(), clock=SystemClock(), state_dir=state_dir)
    for i in agents:
        agent = f"agent-{i}"
        for _ in range(5):
            ticket = engine.enter(
                key=agent, agent=agent, platform="payments", tool="payments",
                deadline_seconds=30.0,
            )  # fmt: skip
            if engine.admit(ticket, 30.0).allowed:
                ticket.attempts = 1
                engine.complete(ticket, upstream, fault="refused", agent_status=502)
    return engine


def measure(command: list[str]) -> float:
    """Bytes per second the command writes to an 80x24 pty after it settled."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[1], SIZE[0], 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(SIZE[0]), "LINES": str(SIZE[1])}
    process = subprocess.Popen(
        command, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT, start_new_session=True
    )
    os.close(slave)
    try:
        _read_for(master, SETTLE_SECONDS)
        start = time.perf_counter()
        count = _read_for(master, SECONDS)
        return count / (time.perf_counter() - start)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        os.close(master)


def _read_for(fd: int, seconds: float) -> int:
    count = 0
    deadline = time.perf_counter() + seconds
    while (left := deadline - time.perf_counter()) > 0:
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                count += len(os.read(fd, 65536))
            except OSError:  # the child is gone
                break
    return count


def main() -> None:
    python = sys.executable
    breakerdeck = str(Path(python).with_name("breakerdeck"))
    cases = [
        (f"{OPEN} open countdowns, nothing else", [python, __file__, "--child"], True),
        (f"{OPEN} countdowns over 2 contexts", [python, __file__, "--child", "--contexts"], True),
        ("breakerdeck demo (default scenario)", [breakerdeck, "demo"], False),
    ]
    print(f"console bytes to a real pty at {SIZE[0]}x{SIZE[1]}, {SECONDS:g} s after "
          f"{SETTLE_SECONDS:g} s to settle (B/s)")  # fmt: skip
    for name, command, targeted in cases:
        rate = measure(command)
        target = f"target <= {TARGET_BYTES_PER_S:,}" if targeted else "(for comparison)"
        met = "" if not targeted else ("  ok" if rate <= TARGET_BYTES_PER_S else "  MISSED")
        print(f"  {name:<40} {rate:>9,.0f}   {target}{met}", flush=True)


if __name__ == "__main__":
    if "--child" in sys.argv:
        child(contexts="--contexts" in sys.argv)
    else:
        main()
