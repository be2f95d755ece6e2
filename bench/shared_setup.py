"""What the parts of bench/shared.py share: the figures' constants, a store on the
bench's Redis, a healthy guarded call, the upstream failures that trip an agent, and the
progress lines."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from breakerdeck.engine.engine import Engine
from breakerdeck.engine.outcomes import SUCCESS, Outcome, OutcomeClass
from breakerdeck.engine.shared import SharedStore

AGENT = "agent-7"
LEASE = 30.0
DOWN = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="backend down")
TRIPS = int(os.environ.get("SHARED_BENCH_TRIPS", "300"))
COUNT_ROUNDS = 50
CLOSED_REPEATS = 15
US = 1e6
WRK_REPEATS = int(os.environ.get("SHARED_BENCH_WRK_REPEATS", "3"))
CONNECTIONS = 64
REPLY_SECONDS = 5.0
TARGET_CLOSED = 1.1
TARGET_P99_MS = 50.0
#: What shared.lua runs inside its script: not round trips.
SCRIPT_COMMANDS = frozenset({"hgetall", "hset", "pexpire", "publish"})
SCRIPT_CALLS = frozenset({"evalsha", "evalsha_ro", "eval", "eval_ro"})
#: The store's listener pings Redis after each second of quiet (noticing a Redis that hangs):
#: counted apart, as no operation sends it.
KEEPALIVE = "ping"


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def store(url: str) -> SharedStore:
    return SharedStore(url, prefix="bench")


def failures(engine: Engine, key: str, n: int) -> None:
    for _ in range(n):
        call = engine.enter(key, key, "up", "GET", LEASE)
        engine.admit(call, LEASE)
        engine.complete(call, DOWN, "upstream", 502)


def guard(engine: Engine) -> Callable[[], None]:
    enter, admit, complete = engine.enter, engine.admit, engine.complete

    def guarded() -> None:
        call = enter(AGENT, AGENT, "up", "GET", LEASE)
        if admit(call, LEASE).allowed:
            complete(call, SUCCESS, "ok", 200)

    return guarded
