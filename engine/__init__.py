"""breakerdeck's engine: circuit breakers for agents' tool and platform calls (docs/engine.md).

The names an adopter needs are here, so `from breakerdeck.engine import Engine` is the whole
import; each module below stays importable on its own for everything else.
"""

from breakerdeck.engine.clock import ManualClock, SystemClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.gateway import Gateway
from breakerdeck.engine.guard import BreakerOpen, Guard
from breakerdeck.engine.harness import Harness, Tool
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
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
