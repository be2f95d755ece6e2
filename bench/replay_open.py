"""`breakerdeck replay` on a large trace: time to its first screen's data and peak memory.

    python -m bench.replay_open make SEED.jsonl OUT.jsonl 1000000   # a demo trace scaled up
    /usr/bin/time -v python -m bench.replay_open open OUT.jsonl     # seconds to the first screen
    python -m bench.replay_open screen OUT.jsonl   # in a terminal (tmux): to the drawn screen

A headless demo writes about 2.4 lines a simulated second at ~1,200 lines a real second, so a
million-line trace is made by repeating a demo trace end to end, each copy's seqs and times moved
past the one before (its ids too, so no call is taken for another). `open` does what the console
does before it draws: the recording loaded, the source made, the board's history and snapshot
read; it prints the seconds that took and the process's peak RSS.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

#: When the bench began (after the interpreter's own start, a few tens of milliseconds).
_STARTED = time.time()
_SEQS = ("seq", "cause_seq", "admitted_seq")
_TIMES = ("t", "admitted_t")


def make(seed: Path, out: Path, lines: int) -> None:
    rows = [json.loads(line) for line in seed.read_text().splitlines() if line.strip()]
    span = rows[-1]["t"] + 1.0
    last_seq = rows[-1]["seq"]
    written = copy = 0
    with out.open("w") as file:
        while written < lines:
            for row in rows[: lines - written]:
                moved = dict(row)
                for name in _SEQS:
                    if isinstance(row.get(name), int):
                        moved[name] = row[name] + copy * last_seq
                for name in _TIMES:
                    if isinstance(row.get(name), int | float):
                        moved[name] = round(row[name] + copy * span, 3)
                moved["at"] = (
                    time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1767225600 + moved["t"]))
                    + f".{round(moved['t'] % 1 * 1000):03d}Z"[-5:]
                )
                if "call_id" in row:
                    moved["call_id"] = f"{row['call_id']}-{copy}"
                file.write(json.dumps(moved, separators=(",", ":")) + "\n")
            written += min(len(rows), lines - (written))
            copy += 1


def open_first_screen(trace: Path) -> float:
    from breakerdeck.console.replay import ReplaySource

    began = time.perf_counter()
    try:
        from breakerdeck.engine.recorded.playback import play_trace

        source = ReplaySource(play_trace(trace), label="bench")
    except ImportError:  # before the index: the whole trace read and folded first
        from breakerdeck.engine.recorded.replay import replay_trace

        source = ReplaySource(replay_trace(trace), label="bench")  # type: ignore[arg-type]
    source.recent(2000)
    source.snapshot()
    return time.perf_counter() - began


def drawn_screen(trace: Path) -> str:
    """`breakerdeck replay` up to its first drawn screen (Textual's `Ready`), then quit: the
    process's CPU seconds (all threads) and wall seconds since the bench began, and the
    imports' CPU. On a shared machine the CPU seconds are the figure: the wall time is mostly
    the load's."""
    from argparse import Namespace

    imports_began = os.times()
    from breakerdeck.console import app
    from breakerdeck.console.replay import ReplaySource, load
    from breakerdeck.console.replay_command import ReplayApp

    imported = _cpu() - (imports_began.user + imports_began.system)
    playback, label = load(Namespace(state_dir=None, trace=str(trace), policy=None))
    seen: list[str] = []

    class Timed(ReplayApp):
        CSS_PATH = str(Path(app.__file__).parent / str(ReplayApp.CSS_PATH))

        def on_ready(self) -> None:
            seen.append(f"first screen: CPU {_cpu():.2f} s (imports {imported:.2f} s), "
                        f"wall {time.time() - _STARTED:.2f} s")  # fmt: skip
            self.exit()

    Timed(ReplaySource(playback, label=label), operator="bench").run()
    return seen[0]


def _cpu() -> float:
    spent = os.times()
    return spent.user + spent.system


def main(argv: list[str]) -> None:
    if argv[0] == "make":
        make(Path(argv[1]), Path(argv[2]), int(argv[3]))
        return
    if argv[0] == "screen":
        print(drawn_screen(Path(argv[1])))
        return
    seconds = open_first_screen(Path(argv[1]))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"first screen {seconds:.2f} s, peak RSS {peak:,.0f} MB")


if __name__ == "__main__":
    main(sys.argv[1:])
