"""OpenTelemetry for every door (DESIGN, "Telemetry"; docs/telemetry.md): spans on the one call
path, the metric families as instruments, the SDK set up from `OTEL_*` for the command-line
doors.

Off is the usual case, and costs nothing: this module imports no OpenTelemetry, and the call
path's one question, `spans()`, reads a module global and the API's own global (no call) until
the application (or a door's `setup`) has set a provider. The library doors (harness,
adapters) use the application's global provider; `use` names providers explicitly.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from breakerdeck.engine.telemetry.tracing import Spans

#: Imported by whoever set up a provider (the application, or `setup`): until then, off. The
#: API keeps the provider set globally in `_TRACER_PROVIDER` (None until one is); were it ever
#: renamed, `tracing.from_global` asks the public way instead.
_API = "opentelemetry.trace"
_MODULES = sys.modules

#: The providers named by `use`; None: the global ones, if any. (Module globals, not a class's
#: attributes: this is read on every call's path.)
_chosen: Spans | None = None


def spans() -> Spans | None:
    """The call path's spans, or None when telemetry is off (asked once per call). A library
    may import OpenTelemetry without anyone setting a provider (redis-py does): off too, read
    from the API's own global before anything is called.

    Off is answered with no call at all (a membership test and an attribute read, not
    `dict.get` and `getattr`): this is asked on every call of every door. Nothing is cached,
    so a provider set later (`use`, or the application's) is seen by the next call."""
    if _chosen is not None:
        return _chosen
    if _API not in _MODULES:
        return None
    try:
        if _MODULES[_API]._TRACER_PROVIDER is None:
            return None
    except AttributeError:  # renamed: `from_global` asks the public way
        pass
    from breakerdeck.engine.telemetry.tracing import from_global

    return from_global()


def use(tracer_provider: Any, meter_provider: Any = None) -> None:
    """Spans (and the duration histograms) from these providers rather than the global ones;
    `use(None)` goes back to the global ones."""
    global _chosen
    if tracer_provider is None:
        _chosen = None
        return
    from breakerdeck.engine.telemetry.tracing import Spans

    _chosen = Spans(tracer_provider, meter_provider)
