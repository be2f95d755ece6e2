"""One deployment the console watches: its source, what the source can do, and the board the
console folds from it. `watch URL…`, `demo` and `replay` have one tab with no context; `watch
--context A --context B` has one per context, each read on its own (a lost one goes stale and
reconnects without holding up the others) and shown one at a time.

A read-only context's tab has no `writes` at all, whatever its token allows: with nothing to
write to, no key, dialog or palette command of this console can reach its engines (the same
way a replay cannot), and `read_only` tells the app to say so when a write key is pressed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from breakerdeck.console.board import Board
from breakerdeck.console.contexts import Context
from breakerdeck.console.source import FreshViews, SharedStores, Source, Writes, fleet_of


@dataclass(eq=False)
class Tab:
    source: Source
    context: Context | None = None
    #: Ids whose cards changed since the screen last drew this tab ("*": all of them).
    pending: set[str] = field(default_factory=set)
    #: (breaker id, the open episode's trip seq) whose credential the operator marked fixed.
    fixed: set[tuple[str, int]] = field(default_factory=set)
    resyncs: int = 0  # snapshots taken: one at start, one after each overflow

    def __post_init__(self) -> None:
        source = self.source
        self.fleet = fleet_of(source)
        self.writes = source if isinstance(source, Writes) and not self.read_only else None
        self.stores = source if isinstance(source, SharedStores) else None
        #: Views read now, where the source can (a probe out writes no line).
        self.probes = source if isinstance(source, FreshViews) else None
        self.board = Board(
            source.thresholds,
            self.fleet.describe,
            origin=self.fleet.origin,
            limits_of=self.fleet.limits_of,
            pooled=self.fleet.pooled,
        )

    @property
    def name(self) -> str | None:
        return self.context.name if self.context is not None else None

    @property
    def read_only(self) -> bool:
        return self.context is not None and self.context.read_only
