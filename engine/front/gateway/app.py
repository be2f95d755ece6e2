"""`breakerdeck gateway` as an ASGI app: the `agent` policy on HTTP (DESIGN, "Front doors").

An agent calls `METHOD /p/<platform>/<path>?<query>` with its bearer token. Refusals come
first, in the design's order, and none of them counts, reaches a platform or carries a call id:
401 `unauthenticated`, 404 `unknown_platform`, 403 `permission_denied`, 413 `body_too_large`.
Then the call, on the call path every door shares (`CallPath._run`: the breaker, 403
`agent_halted`, the opt-in probe wait, the completion): its one attempt is the agent exchange
(`engine.exchange`, on the aiohttp transport of `front.gateway.transport`: the credential under its
deadline, a connection slot bounded per agent and in total, the request, one refresh and retry
on a status in the platform's `auth_failure_statuses`), the outcome decided at the response
head; then the platform's answer streamed back as it came, cut when its agent leaves or stops
reading.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import math
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from breakerdeck.engine import events as ev
from breakerdeck.engine import results
from breakerdeck.engine.calls.callpath import CallPath
from breakerdeck.engine.calls.exchange import Exchange, Failed
from breakerdeck.engine.calls.urls import Base, split_target, upstream_url
from breakerdeck.engine.core.breaker import Admission
from breakerdeck.engine.engine import Call, Engine
from breakerdeck.engine.events import Event
from breakerdeck.engine.front.gateway.config import GatewayConfig
from breakerdeck.engine.front.gateway.credentials import Vault
from breakerdeck.engine.front.gateway.cut import Cut
from breakerdeck.engine.front.gateway.relay import (
    RequestBody,
    UploadProblem,
    new_session,
    relayed_headers,
)
from breakerdeck.engine.front.gateway.slots import Slots
from breakerdeck.engine.front.gateway.transport import Platform, PlatformCall, Upstreams
from breakerdeck.engine.front.gateway.waits import ListeningWaits
from breakerdeck.engine.front.metrics import Counts, registry_for
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.policy import AgentPolicy
from breakerdeck.engine.results import GatewayResponse

log = logging.getLogger(__name__)

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

CALL_HEADER = b"x-breakerdeck-call"
_JSON = (b"content-type", b"application/json")
_BEARER = b"bearer "
#: The body idle timeout, both ways (DESIGN): real seconds, never sped up.
IDLE_SECONDS = 30.0
#: A refusal's shape (reason, cause, hold, whole seconds left) and its encoded headers and body.
_Shape = tuple[Any, Any, Any, int]
_Encoded = tuple[tuple[tuple[bytes, bytes], ...], Message]
_STOPPING = "the gateway is shutting down and its drain ran out before the platform answered"


#: The request headers a call's span continues (lower-case, as ASGI gives them).
_TRACE_CONTEXT = frozenset({b"traceparent", b"tracestate"})


class _GatewayCall(Exchange):
    """One request's call past the checks before the breaker: what the attempt needs (the
    scope, the agent's body, the target), and what goes back (the platform's response to
    stream, or the gateway's own answer; a breaker refusal is `_denied`'s two messages)."""

    __slots__ = (
        "cut",
        "extra",
        "has_body",
        "held",
        "own",
        "quiet",
        "receive",
        "rest",
        "scope",
        "target",
        "transport",
    )

    def __init__(
        self, call: Call, target: Platform, scope: Scope, receive: Receive, rest: bytes, body: bool
    ) -> None:
        super().__init__(call)
        self.target = target
        self.scope = scope
        self.receive = receive
        self.rest = rest
        self.has_body = body
        self.held: aiohttp.ClientResponse | None = None
        #: The gateway's own answer; `extra` and `quiet` are set with it (`answer_with`).
        self.own: GatewayResponse | None = None
        self.cut: Cut | None = None
        self.transport: PlatformCall | None = None

    def answer(self) -> _GatewayCall:
        """Itself: what goes back is decided by what the attempt left on it."""
        return self

    def answer_with(
        self,
        own: GatewayResponse,
        *,
        quiet: bool = False,
        extra: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        """The gateway's own answer, with `extra` headers; `quiet`: a connection that broke
        meanwhile swallows it."""
        self.own, self.quiet, self.extra = own, quiet, extra

    def finish(self) -> None:
        """The connection's watch ended, the platform's response and the slot given back."""
        cut = self.cut
        if cut is None:
            return
        cut.stop()
        if self.held is not None:
            self.held.close() if cut.happened else self.held.release()
        if self.transport is not None and self.transport.slot:
            self.transport.shared.slots.give_back(self.call.agent)


#: Transitions that end a probe another replica sent: waiters here ask the engine again.
_PROBE_ENDS = frozenset({ev.RECOVERED, ev.REOPENED, ev.RESET})


class GatewayApp(CallPath[_GatewayCall, None, _GatewayCall | tuple[Message, Message]]):
    """The ASGI app. `speed` is the engine clock's: deadlines are read on that clock."""

    def __init__(
        self,
        config: GatewayConfig,
        digests: dict[str, str],
        *,
        config_path: str | Path,
        engine: Engine,
        speed: float = 1.0,
        shared_lost: Callable[[], bool] | None = None,
        idle_seconds: float = IDLE_SECONDS,
    ) -> None:
        if not isinstance(engine.policy, AgentPolicy):
            raise TypeError("the gateway runs the 'agent' policy")
        self.engine = engine
        self.policy: AgentPolicy = engine.policy
        self.speed = speed
        for agent, agent_table in config.agents.items():
            engine.configure_mode(agent, agent_table.mode)
        self.vault = Vault(config, Path(config_path))
        self.platforms = {name: self._platform(config, name) for name in config.platforms}
        self._tokens = [(bytes.fromhex(d), agent) for agent, d in sorted(digests.items())]
        table = config.gateway
        self.body_limit = table.body_limit_bytes
        self.replay_limit = table.replay_buffer_bytes
        self.idle = idle_seconds
        self.slots = Slots(
            table.max_connections,
            table.max_connections_per_agent,
            {a: t.max_connections for a, t in config.agents.items() if t.max_connections},
        )
        self.upstreams = Upstreams(engine, self.vault, self.slots, self.session)
        self._shared_lost = shared_lost
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._halted_cache: dict[_Shape, _Encoded] = {}
        self.counts = Counts()
        self.waits = self._waits = ListeningWaits(engine, self._on_event)
        self.registry = registry_for(engine, self.counts)

    def __repr__(self) -> str:
        return f"GatewayApp({sorted(self.platforms)}, {len(self._tokens)} agents)"

    def _platform(self, config: GatewayConfig, name: str) -> Platform:
        table = config.platforms[name]
        deadline = config.deadline(name, self.policy.deadline_seconds)
        return Platform(
            name,
            Base.parse(table.base_url),
            table.token_url,
            table.probe_wait_seconds / self.speed,
            deadline,
            deadline / self.speed,
            self.policy.probe_lease(deadline),
            frozenset(table.auth_failure_statuses),
        )

    # -- ASGI --------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            # Not `await self._http(...)`: one coroutine fewer on every request.
            return await self._http(scope, receive, send)
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.session()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def session(self) -> aiohttp.ClientSession:
        """The relay's client session, made on first use inside the running loop."""
        if self._session is None:
            self._loop = asyncio.get_running_loop()
            self._session = new_session()
        return self._session

    async def aclose(self) -> None:
        self.waits.close()
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _on_event(self, event: Event) -> None:
        """Attached only while a call waits for a probe (or a feed listens anyway): a reset, or
        another replica's probe ending (relayed), lets the waiters ask the engine now.
        Listeners may run on the feed's or the shared store's thread; the event loop is only
        touched through its thread-safe door."""
        ends_probe = event.type == ev.RESET or (event.relayed and event.type in _PROBE_ENDS)
        if ends_probe and self._loop is not None:
            self._loop.call_soon_threadsafe(self.waits.wake, event.key)

    # -- the request ---------------------------------------------------------------------

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        if path.startswith("/-/") and scope["method"] in ("GET", "HEAD"):
            await self._operations(path, send)
            return
        token, declared = _scan(scope["headers"])
        agent = self._agent(token)
        if agent is None:
            await _answer(send, 401, {"error": "unauthenticated"})
            return
        target = split_target(scope["raw_path"])
        platform = self.platforms.get(target[0]) if target else None
        if target is None or platform is None:
            await _answer(send, 404, {"error": "unknown_platform"})
            return
        if not self.vault.granted(agent, platform.name):
            await _answer(send, 403, {"error": "permission_denied"})
            return
        if declared > self.body_limit:
            await _answer(send, 413, {"error": "body_too_large"})
            return
        # key, agent, platform, tool (the platform), deadline: positional, on every request.
        call = self.engine.enter(agent, agent, platform.name, platform.name, platform.deadline)
        this = _GatewayCall(call, platform, scope, receive, target[1], declared != 0)
        try:
            answer = await self._run(this, platform.lease, platform.probe_wait_seconds)
            if isinstance(answer, tuple):
                start, halted = answer  # the fast-fail path: no coroutine of its own
                await send(start)
                await send(halted)
            elif answer.own is not None:
                await self._own_answer(send, answer, answer.own)
            elif answer.held is not None and answer.cut is not None:
                answer.cut.arm()  # the stream, sent from here: one frame fewer per chunk
                await self._stream_back(send, answer.held, call, answer.cut)
        finally:
            this.finish()

    def _denied(self, this: _GatewayCall, admission: Admission) -> tuple[Message, Message]:
        return self._halted(admission, this.call)

    def _carrier(self, this: _GatewayCall) -> dict[str, str]:
        """The agent's trace context, which the call's span continues (asked only with
        telemetry on): `traceparent` and `tracestate`, never its `baggage`."""
        return {
            name.decode("latin-1"): value.decode("latin-1")
            for name, value in this.scope["headers"]
            if name in _TRACE_CONTEXT
        }

    def _halted(self, admission: Admission, call: Call) -> tuple[Message, Message]:
        """403 `agent_halted`: the fast-fail path, as its two messages (the caller sends them:
        no coroutine of its own). Its headers and body message are made once per (reason,
        cause, hold, whole seconds left) and reused until the second changes; a refusal
        allocates only its call id and the start message."""
        shape = (
            admission.reason,
            admission.cause,
            admission.hold,
            math.ceil(admission.retry_after),
        )
        encoded = self._halted_cache.get(shape)
        if encoded is None:
            encoded = self._encode_halted(shape, admission)
        headers, body = encoded
        start = {
            "type": "http.response.start",
            "status": 403,
            # `engine.call_id`, formatted straight to bytes.
            "headers": [*headers, (CALL_HEADER, b"call-%06d" % call.number)],
        }
        return start, body

    def _encode_halted(self, shape: _Shape, admission: Admission) -> _Encoded:
        if len(self._halted_cache) > 1024:
            self._halted_cache.clear()
        halted = results.agent_halted(admission)
        content = json.dumps(halted.body).encode()
        retry = str(halted.body["halt"]["retry_after_seconds"]).encode()
        headers = (_JSON, (b"content-length", b"%d" % len(content)), (b"retry-after", retry))
        encoded = self._halted_cache[shape] = (
            headers,
            {"type": "http.response.body", "body": content},
        )
        return encoded

    def _agent(self, token: bytes | None) -> str | None:
        """The agent whose token this is, compared in constant time against every agent's
        digest (no early exit, so timing says nothing about which or how many matched)."""
        if token is None or token[:7].lower() != _BEARER:
            return None
        digest = hashlib.sha256(token[7:].strip()).digest()
        found = None
        for known, agent in self._tokens:
            if hmac.compare_digest(digest, known):
                found = agent
        return found

    async def _operations(self, path: str, send: Send) -> None:
        if path == "/-/healthz":
            body: dict[str, Any] = {"status": "ok"}
            if self._shared_lost is not None and self._shared_lost():
                body["shared"] = "lost"
            warning = self.engine.shared_warning
            if warning is not None:  # the clock off the shared store's: serving all the same
                body["shared_warning"] = warning
            await _answer(send, 200, body)
        elif path == "/-/metrics":
            text = await asyncio.to_thread(generate_latest, self.registry)
            headers = [(b"content-type", CONTENT_TYPE_LATEST.encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": text})
        else:
            await _answer(send, 404, {"error": "not_found"})

    # -- the call ------------------------------------------------------------------------

    async def _attempt(self, this: _GatewayCall) -> None:
        """The exchange, watched: when the agent leaves, this task is cancelled, so the
        platform's request is closed at once. A cancellation that is not the agent leaving is
        the drain's end (SIGTERM). The completion that follows is never cut."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        scope = this.scope
        platform = this.target
        url = upstream_url(platform.base, this.rest, scope["query_string"])
        body = RequestBody(this.receive, self.body_limit, self.replay_limit, self.idle)
        transport = this.transport = PlatformCall(
            self.upstreams, this.call, platform, scope, url, body
        )
        cut = this.cut = Cut(scope)
        try:
            cut.arm()
            if this.has_body:
                await body.start()
            else:
                body.no_body()
            this.held = await this.run(transport)
            cut.disarm()
            self.counts.observe(this.call.key, (loop.time() - started) * self.speed)
        except UploadProblem as problem:
            cut.disarm()
            this.platform_status = None
            if problem.status == 499:  # the agent left mid-upload
                self._agent_left(this)
            else:
                # The agent's to fix, recorded uncounted (a probe's slot is freed).
                this.fault = "none"
                this.decide(
                    Outcome(OutcomeClass.CALLER_ERROR, detail=problem.error), problem.status
                )
                this.answer_with(
                    GatewayResponse(problem.status, {"error": problem.error}), quiet=True
                )
        except Failed as failed:
            cut.disarm()
            self.counts.observe(this.call.key, (loop.time() - started) * self.speed)
            retry = failed.retry_after
            extra = None if retry is None else [(b"retry-after", b"%d" % retry)]
            this.answer_with(failed.answer, extra=extra)
        except asyncio.CancelledError:
            if not cut.uncancel():
                raise
            self._cut_before_head(this, cut)

    def _completed(self, call: Call, outcome: Outcome) -> None:
        """Counted with the outcome the call was recorded as: an abandoned probe the breaker
        judged the third in a row is a counted timeout here too, as in the audit log."""
        super()._completed(call, outcome)
        self.counts.calls[(call.key, outcome.cls.value, outcome.counted)] += 1

    def _cut_before_head(self, this: _GatewayCall, cut: Cut) -> None:
        """The call ended before the platform's head: the agent left (uncounted, nobody to
        answer), or the drain ran out (the gateway's own condition, answered and audited)."""
        if cut.agent_left:
            self._agent_left(this)
            return
        this.decide(Outcome(OutcomeClass.GATEWAY_BUSY, detail=_STOPPING), 503)
        this.answer_with(results.gateway_stopping(_STOPPING), quiet=True)

    def _agent_left(self, this: _GatewayCall) -> None:
        """The agent abandoned its call: completed as at every door (`Engine.abandoned`,
        neutral; a probe's third in a row counts), with nobody to answer."""
        outcome, this.fault, _ = self.engine.abandoned(this.call)
        this.decide(outcome, 499)

    async def _own_answer(self, send: Send, this: _GatewayCall, own: GatewayResponse) -> None:
        try:
            await _answer(send, own.status, own.body, this.call, this.extra)
        except OSError:
            if not this.quiet:
                raise

    async def _stream_back(
        self, send: Send, response: aiohttp.ClientResponse, call: Call, cut: Cut
    ) -> None:
        """The platform's answer as it came, each chunk sent as soon as it arrives (an SSE
        event, or a slow small body, reaches the agent when the platform sends it); a body
        that has fully arrived by its first read goes back in one message (one write). A
        platform that stops mid-body ends the agent's response short, as the platform did. No
        progress either way for the idle timeout (an agent that stopped reading, a platform
        that stopped sending), the agent leaving, or the drain's end: the stream is cut."""
        headers = relayed_headers(response.raw_headers)
        headers.append((CALL_HEADER, call.call_id.encode()))
        content = response.content
        start = {"type": "http.response.start", "status": response.status, "headers": headers}
        try:
            if content.is_eof() and not cut.write_paused():
                # The whole body has arrived and the agent is reading: nothing here can wait.
                await send(start)
                await send({"type": "http.response.body", "body": await content.read()})
                return
            async with asyncio.timeout(self.idle) as idle:
                await send(start)
                chunk = await content.readany()
                while not content.at_eof():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    idle.reschedule(asyncio.get_running_loop().time() + self.idle)
                    chunk = await content.readany()
                await send({"type": "http.response.body", "body": chunk})
        except (aiohttp.ClientError, OSError) as error:
            log.info("%s: the platform's body stopped: %s", call.call_id, type(error).__name__)
            cut.abort()
        except TimeoutError:
            log.info("%s: no progress for %g s: stream cut", call.call_id, self.idle)
            cut.abort()
        except asyncio.CancelledError:
            if not cut.uncancel():
                raise
            cut.abort()


def _scan(headers: Iterable[tuple[bytes, bytes]]) -> tuple[bytes | None, float]:
    """The Authorization header and the body's declared length, in one pass over the headers:
    Content-Length (infinity when it is not a number), -1 for a chunked body (its size is
    known only at its end, so it is checked as it streams), 0 for no body at all."""
    token = None
    length: float = 0
    for name, value in headers:
        if name == b"authorization":
            token = value
        elif name == b"content-length":
            length = int(value) if value.isdigit() else math.inf
        elif name == b"transfer-encoding" and length == 0:
            length = -1
    return token, length


async def _answer(
    send: Send,
    status: int,
    body: dict[str, Any],
    call: Call | None = None,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    content = json.dumps(body).encode()
    headers = [_JSON, (b"content-length", str(len(content)).encode())]
    if call is not None:
        headers.append((CALL_HEADER, call.call_id.encode()))
    if extra:
        headers += extra
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": content})
