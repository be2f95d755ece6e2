"""What a replica knows of a breaker the fleet shares: the store's answers, as the engine reads
them, and the store's interface. No Redis here, so the engine imports it without the `front`
extra; `shared.py` is the Redis side."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from breakerdeck.engine.core.breaker import BreakerState
from breakerdeck.engine.events import Transition
from breakerdeck.engine.parts.decide import Arg, Decider
from breakerdeck.engine.policy import AgentPolicy

if TYPE_CHECKING:
    from breakerdeck.engine.parts.operations import Parts

#: The most breakers a replica takes from the shared store (on joining, or from messages):
#: more is a foreign or damaged database.
MAX_SHARED_KEYS = 100_000


@dataclass(frozen=True, slots=True)
class Shared:
    """One breaker as the store holds it after a script, read within bounds (wall-clock
    times), with what that script decided."""

    name: str
    ver: int
    gen: int
    #: The generations of operator writes: holds (a hold, a release, a reset, a hold's
    #: expiry) and modes; on a replica's return they decide whose stands (`Fleet._reconcile`).
    hold_gen: int
    mode_gen: int
    #: The operator's mode and the configuration's value it was chosen over, if any.
    mode: tuple[str, str] | None
    origin: str
    state: BreakerState
    probe: str
    probe_deadline: float
    transitions: tuple[Transition, ...]
    #: The call token whose probe the script expired, and how many of `transitions` that made.
    expired: str | None
    expired_count: int
    #: `admit`: "normal", "probe", "open" or "probe_in_flight"; `left`: an open one's wait.
    admit: str | None
    left: float
    #: `record`: whether the call was the current probe.
    was_probe: bool
    #: `reconcile`: whose verdict stands, "store" or "replica".
    won: str | None
    #: Who wrote the verdict before this script (the writer of a verdict only read).
    writer: str


class Missing:
    """The key is gone from the store though this replica saw it: wiped, or collected."""

    happened = "vanished from the shared store (wiped, or idle a day)"


class Behind(Missing):
    """The store holds the key as it was before a transition this replica saw: a failover's
    new primary missed a write. Written back, as a missing key is."""

    happened = "was older in the shared store than this replica had seen it (a failover)"


class Foreign:
    """The key was written by another format of breakerdeck: never touched."""

    def __init__(self, format: str) -> None:
        self.format = format


Reply = Shared | Missing | Foreign
OnChange = Callable[[Shared], None]
OnJoin = Callable[[], None]


def token(instance: str, number: int) -> str:
    """A call as every replica names it: the probe slot holds one of these."""
    return f"{instance}:{number}"


class Store(Protocol):
    """What the engine asks of the shared store (`shared.SharedStore`)."""

    @property
    def lost(self) -> str | None: ...

    @property
    def clock_warning(self) -> str | None: ...

    def problems(self) -> list[str]: ...

    def note(self, problem: str) -> None: ...

    def use_policy(self, policy: AgentPolicy) -> None: ...

    def run(
        self, op: str, name: str, now: float, origin: str, seen: tuple[int, int], *extra: Arg
    ) -> Reply | None: ...

    def run_many(
        self,
        op: str,
        names: list[str],
        now: float,
        origin: str,
        seen: dict[str, tuple[int, int]],
    ) -> list[Reply | None]: ...

    def names(self) -> list[str]: ...

    def start(self, on_change: OnChange, on_join: OnJoin, wall: Callable[[], float]) -> None: ...

    def close(self) -> None: ...

    def member(self, parts: Parts) -> Member:
        """The engine's membership of the fleet this store serves (`fleet.Fleet`), over the
        engine's parts: made by the store, so the engine never imports the fleet."""
        ...


class Member(Decider, Protocol):
    """An engine's membership of a fleet: its decider (`decide.Decider`), its store, and
    joining the fleet once the engine is restored."""

    store: Store

    def start(self) -> None: ...
