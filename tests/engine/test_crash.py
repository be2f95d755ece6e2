"""A crash loop: a process under load on a state dir, killed -9 at random moments, again and
again. Whatever it was told was done must still be done: no seq or call id handed out twice, no
acknowledged audit row lost, and every trip whose call returned without a storage problem open
after the restart."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from breakerdeck.engine.engine import Engine
from breakerdeck.engine.policy import ToolPolicy

ROUNDS = 5

#: Calls on 40 keys, half of them failing, as fast as one thread goes; it writes what it was
#: told as it goes: each seq (ROW when the audit log keeps the line), each call id, each trip
#: its call returned from with no problem listed, and each acknowledged seq (after flush()).
CHILD = """
import os, random, sys
from breakerdeck.engine import events as ev
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.outcomes import SUCCESS, Outcome, OutcomeClass
from breakerdeck.engine.policy import ToolPolicy

state, name, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(seed)
failure = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="refused")


def say(line):
    os.write(1, (line + "\\n").encode())


engine = Engine(ToolPolicy(), state_dir=state)
engine.subscribe(lambda e: say(f"{'ROW' if ev.audit_form(e) else 'SEQ'} {e.seq}"))
engine.restore()
say("READY")
n = 0
while True:
    n += 1
    key = f"{name}-{rng.randrange(40)}"
    call = engine.enter(key=key, agent="a", platform="p", tool="t", deadline_seconds=30)
    say(f"CALL {call.call_id}")
    if engine.admit(call, lease=61).allowed:
        was = engine.view(key).state
        outcome = failure if rng.random() < 0.5 else SUCCESS
        engine.complete(call, outcome, fault="x", agent_status="x")
        if was == "closed" and engine.view(key).state == "open" and not engine.problems:
            say(f"OPEN {key}")
    if n % 50 == 0:
        seq = engine.seq
        engine.audit.flush()
        say(f"ACK {seq}")
"""


def run_round(state: Path, out: Path, name: str, rng: random.Random) -> dict[str, list[str]]:
    """Start the child, let it work a random while, kill it -9; what it said, by kind."""
    with out.open("wb") as sink:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(state), name, str(rng.randrange(1 << 30))],
            stdout=sink,
        )
        try:
            deadline = time.monotonic() + 30
            while b"READY" not in out.read_bytes() and time.monotonic() < deadline:
                assert child.poll() is None, "the child died before it was killed"
                time.sleep(0.01)
            time.sleep(rng.uniform(0.2, 1.0))
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
    said: dict[str, list[str]] = defaultdict(list)
    for line in out.read_text().splitlines(keepends=True):
        if line.endswith("\n") and " " in line:  # a line cut by the kill is not something said
            kind, value = line.split()
            said[kind].append(value)
    return said


def test_kill_9_at_random_moments_never_repeats_numbers_or_loses_what_was_acknowledged(
    tmp_path: Path,
) -> None:
    rng = random.Random(8)
    state = tmp_path / "state"
    used_seqs: set[int] = set()
    used_calls: set[str] = set()
    opened: set[str] = set()
    for round_ in range(ROUNDS):
        said = run_round(state, tmp_path / f"round-{round_}.out", f"r{round_}", rng)
        seqs = sorted(int(s) for s in said["SEQ"] + said["ROW"])
        assert seqs, "the child did no work before it was killed"
        assert seqs == list(range(seqs[0], seqs[-1] + 1)), "seqs within a run are consecutive"
        assert used_seqs.isdisjoint(seqs), f"round {round_} reused a seq"
        assert used_calls.isdisjoint(said["CALL"]), f"round {round_} reused a call id"
        assert len(set(said["CALL"])) == len(said["CALL"])
        used_seqs.update(seqs)
        used_calls.update(said["CALL"])
        opened.update(said["OPEN"])
        acknowledged = max((int(s) for s in said["ACK"]), default=0)

        with Engine(ToolPolicy(), state_dir=state) as engine:
            logged = {event.seq for event in engine.audit.query(limit=10_000_000)}
            rows = {int(s) for s in said["ROW"] if int(s) <= acknowledged}
            assert rows <= logged, f"round {round_} lost {len(rows - logged)} acknowledged rows"
            states = {event.key: event.fields["state"] for event in engine.restore()}
            still_open = {key for key in opened if states.get(key) == "open"}
            assert still_open == opened, f"trips lost in round {round_}: {opened - still_open}"
            used_seqs.update(range(seqs[-1] + 1, engine.seq + 1))  # the checker's own lines
    assert opened, "no trip happened: the loop proved nothing about trips"


#: An operator's hold taken, then calls refused as held as fast as one thread goes (each a line
#: the audit log keeps) until the kill.
HOLDING = """
import os, sys
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.policy import ToolPolicy

engine = Engine(ToolPolicy(), state_dir=sys.argv[1])
engine.restore()
engine.configure_mode("crm@default")
engine.hold("crm@default", "ana", "vendor maintenance", 3600)
os.write(1, b"HELD\\n")
while True:
    call = engine.enter(key="crm@default", agent="a", platform="crm", tool="t", deadline_seconds=30)
    assert not engine.admit(call, lease=61).allowed
"""


def test_a_hold_survives_a_kill_9_among_its_refusals(tmp_path: Path) -> None:
    state, out = tmp_path / "state", tmp_path / "held.out"
    with out.open("wb") as sink:
        child = subprocess.Popen([sys.executable, "-c", HOLDING, str(state)], stdout=sink)
        try:
            deadline = time.monotonic() + 30
            while b"HELD" not in out.read_bytes() and time.monotonic() < deadline:
                assert child.poll() is None, "the child died before it was killed"
                time.sleep(0.01)
            time.sleep(0.3)  # among the refusals
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
    with Engine(ToolPolicy(), state_dir=state) as engine:
        engine.restore()
        view = engine.view("crm@default")
        assert (view.state, view.held_by, view.held_reason) == ("held", "ana", "vendor maintenance")
        call = engine.enter(
            key="crm@default", agent="a", platform="crm", tool="t", deadline_seconds=30
        )
        admission = engine.admit(call, lease=61)
        assert not admission.allowed and admission.hold is not None
