"""One `execute_tool {gen_ai.tool.name}` span per call on the one call path, its attempts as
child spans, the transitions it caused as span events (DESIGN, "Telemetry").

The span is opened where the call path starts (`CallPath._run`, `_run_sync`, `_refused`) and
ended when it answers: a streamed answer's at its response head, since the gateway streams
after `_run` returns. What the call was is read from the engine's own lines, not from the
door: each engine is watched once (`Watch`), and its `call.completed` or `call.denied` line
names the call, its outcome and attempts; a transition names the line that caused it
(`cause_seq`), or, when time caused it (a half-open found at admission), the call being
admitted. So every door's span says the same things in the same words.

What never goes in: arguments, results, query strings, headers, credentials, exception text.
A failure is its outcome class (`error.type`), an exception only its type's name.
"""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

import breakerdeck.engine.telemetry.names as names
from breakerdeck.engine import events as ev
from breakerdeck.engine.core.breaker import DenyReason
from breakerdeck.engine.events import CallCompleted, CallDenied, Event
from breakerdeck.engine.outcomes import Outcome
from breakerdeck.engine.parts.call import Call
from breakerdeck.engine.telemetry.meters import Durations

if TYPE_CHECKING:
    from breakerdeck.engine.engine import Engine

#: A budget, an attempt's result, the call's answer.
B = TypeVar("B")
A = TypeVar("A")
R = TypeVar("R")

#: W3C trace context only: the agent's `baggage` is never read, so never sent on.
_PROPAGATOR = TraceContextTextMapPropagator()
#: The events a call's span carries (a verdict restored at start is no call's).
_TRANSITIONS = (ev.TRANSITIONS | {ev.CREDENTIAL_REVOKED, ev.CREDENTIAL_RESTORED}) - {ev.RESTORED}
_TRACE_HEADERS = frozenset({"traceparent", "tracestate"})
_DENIED = {DenyReason.OPEN: "circuit_open", DenyReason.PROBE_IN_FLIGHT: "probe_in_flight"}


class Traced:
    """One call's span while the call runs: ours to end, or the framework's to add to."""

    __slots__ = ("call", "error", "own", "seqs", "span", "started", "watch")

    def __init__(self, span: Span, own: bool, call: Call, watch: Watch) -> None:
        self.span = span
        self.own = own
        self.call = call
        self.watch = watch
        self.started = time.perf_counter()
        #: `error.type` once known: the outcome class, a refusal's reason, an exception's type.
        self.error: str | None = None
        #: The seqs of this call's lines and transitions, which later transitions may name.
        self.seqs: list[int] = []

    def completed(self, line: CallCompleted) -> None:
        outcome = line.result
        attributes: dict[str, Any] = {
            names.OUTCOME: outcome.cls.value,
            names.COUNTED: outcome.counted,
            names.ATTEMPTS: line.attempts,
            names.PROBE: line.admitted_as == "probe",
        }
        if outcome.retry_after is not None:
            attributes[names.RETRY_AFTER] = outcome.retry_after
        self.span.set_attributes(attributes)
        if not outcome.is_success:
            self.error = outcome.cls.value

    def denied(self, line: CallDenied) -> None:
        reason = DenyReason(line.reason) if line.reason else DenyReason.OPEN
        self.error = _DENIED[reason]
        self.span.set_attributes(
            {
                names.DENIED: reason.value,
                names.ATTEMPTS: 0,
                names.RETRY_AFTER: line.retry_after_seconds,
            }
        )

    def refused(self, outcome: Outcome) -> None:
        self.span.set_attributes(
            {names.OUTCOME: outcome.cls.value, names.COUNTED: False, names.ATTEMPTS: 0}
        )
        self.error = outcome.cls.value

    def moved(self, event: Event) -> None:
        self.span.add_event(event.type, names.transition_attributes(event))

    def end(self, spans: Spans) -> None:
        watch = self.watch
        watch.calls.pop(self.call.number, None)
        for seq in self.seqs:
            watch.lines.pop(seq, None)
        span = self.span
        error = self.error
        if error is not None:
            span.set_attribute(names.ERROR_TYPE, error)
            span.set_status(Status(StatusCode.ERROR))
        spans.measured(self.call, error, time.perf_counter() - self.started)
        if self.own:
            span.end()


class Watch:
    """One engine's lines, matched to the spans of the calls they are about. Lines are handed
    out on whichever thread delivers them; each is a dict lookup or two."""

    __slots__ = ("calls", "lines")

    def __init__(self) -> None:
        #: Running calls by number, and the lines they wrote by seq.
        self.calls: dict[int, Traced] = {}
        self.lines: dict[int, Traced] = {}

    def __call__(self, event: Event) -> None:
        if type(event) is CallCompleted:
            traced = self.calls.get(event.call_number)
            if traced is not None:
                traced.completed(event)
                self._wrote(traced, event)
        elif type(event) is CallDenied:
            traced = self.calls.get(event.call_number)
            if traced is not None:
                traced.denied(event)
                self._wrote(traced, event)
        elif event.type in _TRANSITIONS and not event.relayed:
            cause = event.fields.get("cause_seq")
            traced = self.lines.get(cause) if cause is not None else _admitting.get()
            if traced is not None and traced.call.key == event.key:
                traced.moved(event)
                self._wrote(traced, event)

    def _wrote(self, traced: Traced, event: Event) -> None:
        self.lines[event.seq] = traced
        traced.seqs.append(event.seq)


#: The call this context is running: a transition no line caused (time: a half-open found at
#: admission) belongs to it.
_admitting: ContextVar[Traced | None] = ContextVar("breakerdeck_call", default=None)


class Spans:
    """The call path's spans from one tracer provider (and the duration histograms from one
    meter provider, when given)."""

    def __init__(self, tracer_provider: Any, meter_provider: Any = None) -> None:
        self.tracer = tracer_provider.get_tracer(names.SCOPE)
        self._watches: weakref.WeakKeyDictionary[Engine, Watch] = weakref.WeakKeyDictionary()
        self._durations = None if meter_provider is None else Durations(meter_provider)

    def watch(self, engine: Engine) -> Watch:
        watch = self._watches.get(engine)
        if watch is None:
            watch = self._watches[engine] = Watch()
            engine.subscribe(watch)
        return watch

    def start(self, engine: Engine, call: Call, carrier: Mapping[str, str] | None) -> Traced:
        """The call's span: the framework's `execute_tool` span when one is current (it is
        added to, never ended here), else a new one under `carrier`'s trace context (the
        gateway's agent's `traceparent`) or the current one."""
        watch = self.watch(engine)
        current = trace.get_current_span()
        if carrier is None and _is_execute_tool(current):
            current.set_attributes(names.adopted_attributes(call, _attributes_of(current)))
            traced = Traced(current, False, call, watch)
        else:
            parent = None if carrier is None else _PROPAGATOR.extract(carrier)
            span = self.tracer.start_span(
                f"{names.EXECUTE_TOOL} {call.tool}",
                context=parent,
                kind=SpanKind.INTERNAL,
                attributes=names.call_attributes(call),
            )
            traced = Traced(span, True, call, watch)
        watch.calls[call.number] = traced
        return traced

    async def run(
        self,
        engine: Engine,
        call: Call,
        carrier: Mapping[str, str] | None,
        steps: Callable[[Callable[[B], Awaitable[A]]], Awaitable[R]],
        attempt: Callable[[B], Awaitable[A]],
    ) -> R:
        """`steps` (the call path's loop) inside the call's span, each attempt a child span."""
        tracer = self.tracer

        async def traced(budget: B) -> A:
            with _attempt_span(tracer, _attempt_number(budget)):
                return await attempt(budget)

        with self._running(engine, call, carrier):
            return await steps(traced)

    def run_sync(
        self,
        engine: Engine,
        call: Call,
        steps: Callable[[Callable[[], A]], R],
        attempt: Callable[[], A],
    ) -> R:
        tracer = self.tracer

        def traced() -> A:
            with _attempt_span(tracer, {}):
                return attempt()

        with self._running(engine, call, None):
            return steps(traced)

    @contextlib.contextmanager
    def _running(
        self, engine: Engine, call: Call, carrier: Mapping[str, str] | None
    ) -> Iterator[None]:
        """The call's span, current while the call runs; ended (when ours) as it answers."""
        traced = self.start(engine, call, carrier)
        token = otel_context.attach(trace.set_span_in_context(traced.span))
        admitting = _admitting.set(traced)
        try:
            yield
        except BaseException as error:
            traced.error = traced.error or type(error).__qualname__
            raise
        finally:
            _admitting.reset(admitting)
            otel_context.detach(token)
            traced.end(self)

    def refused(self, engine: Engine, call: Call, outcome: Outcome) -> None:
        """A refusal before the breaker: a call too, with a span as short as it was."""
        traced = self.start(engine, call, None)
        traced.refused(outcome)
        traced.end(self)

    def outbound(self, headers: list[tuple[str, str]]) -> None:
        """The gateway's request to a platform carries its own `traceparent` (the current
        attempt's, continuing the agent's trace) instead of the agent's; `tracestate` likewise."""
        headers[:] = [h for h in headers if h[0].lower() not in _TRACE_HEADERS]
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier)
        headers.extend(carrier.items())

    def measured(self, call: Call, error: str | None, seconds: float) -> None:
        durations = self._durations
        if durations is not None:
            durations.record(call, error, seconds)


def _attempt_number(budget: Any) -> dict[str, int]:
    """The attempt's number in its call (1 for the first), read before it is counted."""
    call = getattr(budget, "call", None)
    return {} if call is None else {names.ATTEMPT_NUMBER: call.attempts + 1}


@contextlib.contextmanager
def _attempt_span(tracer: Any, attributes: dict[str, int]) -> Iterator[None]:
    """One attempt's span, current while it runs. One that raised says its type's name only
    (the text may carry a URL or a secret)."""
    span = tracer.start_span(names.ATTEMPT, attributes=attributes)
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        yield
    except BaseException as error:
        span.set_attribute(names.ERROR_TYPE, type(error).__qualname__)
        span.set_status(Status(StatusCode.ERROR))
        raise
    finally:
        otel_context.detach(token)
        span.end()


def _attributes_of(span: Span) -> Mapping[str, Any]:
    """A recording span's attributes (the SDK's spans show theirs; the API promises none)."""
    return getattr(span, "attributes", None) or {}


def _is_execute_tool(span: Span) -> bool:
    """A framework's own `execute_tool` span for this call (PydanticAI, ADK open one)."""
    if not span.is_recording():
        return False
    attributes = _attributes_of(span)
    name = getattr(span, "name", "")
    return bool(
        attributes.get(names.OPERATION) == names.EXECUTE_TOOL
        or name.startswith(names.EXECUTE_TOOL + " ")
    )


class _Global:
    """The global provider last seen, and the spans made from it."""

    provider: Any = None
    spans: Spans | None = None


def from_global() -> Spans | None:
    """Spans from the application's global tracer provider, once it has a real one (the API's
    default proxy, with no SDK behind it, records nothing: off)."""
    provider = trace.get_tracer_provider()
    if provider is _Global.provider:
        return _Global.spans
    _Global.provider = provider
    recording = not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)
    _Global.spans = Spans(provider, _global_meters()) if recording else None
    return _Global.spans


def _global_meters() -> Any:
    from opentelemetry import metrics

    return metrics.get_meter_provider()
