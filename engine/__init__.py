"""breakerdeck's engine: circuit breakers for agents' tool and platform calls (docs/engine.md).

The names an adopter needs are here, so `from breakerdeck.engine import Engine` is the whole
import; each module below stays importable on its own for everything else.

The folders are the architecture, each importing only the floors below it
(`tests/test_import_graph.py` holds them to it):

1. the vocabulary, at the top level: `clock`, `simtime`, `errors`, `events`, `outcomes`,
   `policy`, `state`, `text` and `page` (the operator's page hook);
2. `core/`: the pure breaker, the classification of outcomes, the verdict; then `results`
   (top level: the answers callers get, worded from the core's admissions);
3. `storage/`: the state dir, the verdict store, the audit log, the trace writer;
   `recorded/`: traces and audit logs read back (replay, whatif);
4. `parts/`: the engine's parts, each owning its state;
5. `replicas/`: one agent's breaker shared across processes;
6. `engine` (top level): the `Engine` facade over the parts;
7. `calls/`: one call's path, written once for every door; `telemetry/`;
8. the doors: `harness`, `gateway`, `shared` (the Redis store), `feed/`, `front/` and the
   adapters (installed as `breakerdeck.adapters`).
"""

from breakerdeck.engine.clock import ManualClock, SystemClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.gateway import Gateway
from breakerdeck.engine.harness import Harness, Tool
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.parts.guard import BreakerOpen, Guard
from breakerdeck.engine.policy import AgentPolicy, ToolPolicy
from breakerdeck.engine.state import State

__all__ = [
    "AgentPolicy",
    "BreakerOpen",
    "Engine",
    "Gateway",
    "Guard",
    "Harness",
    "ManualClock",
    "Outcome",
    "OutcomeClass",
    "State",
    "SystemClock",
    "Tool",
    "ToolPolicy",
]
