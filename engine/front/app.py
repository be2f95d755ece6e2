"""`breakerdeck gateway` as an ASGI app: the `agent` policy on HTTP (DESIGN, "Front doors").

An agent calls `METHOD /p/<platform>/<path>?<query>` with its bearer token. Refusals come
first, in the design's order, and none of them counts, reaches a platform or carries a call id:
401 `unauthenticated`, 404 `unknown_platform`, 403 `permission_denied`, 413 `body_too_large`.
Then the breaker (403 `agent_halted`), then the call: the credential under its deadline, a
connection slot (bounded per agent and in total), the request, one refresh and retry on a
status in the platform's `auth_failure_statuses`, the outcome decided at the response head,
and the platform's answer streamed back as it came, cut when its agent leaves or stops reading.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import math
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from yarl import URL

from breakerdeck.engine import events as ev
from breakerdeck.engine import results
from breakerdeck.engine.classify import agent_outcome_for_response
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.errors import VaultUnavailable
from breakerdeck.engine.events import Event
from breakerdeck.engine.front.calls import Admission, Call, Calls
from breakerdeck.engine.front.config import GatewayConfig
from breakerdeck.engine.front.credentials import Vault
from breakerdeck.engine.front.metrics import Counts, registry_for
from breakerdeck.engine.front.protocol import EXTENSION, BoundedProtocol
from breakerdeck.engine.front.relay import (
    RequestBody,
    UploadProblem,
    fault_and_detail,
    forwarded_headers,
    new_session,
    relayed_headers,
)
from breakerdeck.engine.front.slots import Busy, Slots
from breakerdeck.engine.front.urls import Base, split_target, upstream_url
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
#: How long a call waits for a connection slot before it is answered `gateway_busy`.
SLOT_WAIT_SECONDS = 1.0
#: The body idle timeout, both ways (DESIGN): real seconds, never sped up.
IDLE_SECONDS = 30.0
#: A refusal's shape (reason, cause, whole seconds left) and its encoded headers and body.
_Shape = tuple[Any, Any, int]
_Encoded = tuple[tuple[tuple[bytes, bytes], ...], Message]


@dataclass(frozen=True, slots=True)
class Platform:
    name: str
    base: Base
    token_url: str | None
    probe_wait_seconds: float
    #: On the engine's clock (the call's line and the probe's lease) and in real seconds.
    deadline: float
    real_deadline: float
    lease: float
    auth_statuses: frozenset[int]


@dataclass(slots=True)
class _Attempt:
    """What the last attempt did, for the call's line, and whether the call holds a
    connection slot."""

    fault: str = "none"
    platform_status: int | None = None
    refresh: str | None = None
    slot: bool = False


class _Failed(Exception):
    """The call could not be completed: an upstream failure, or an auth failure after the
    refresh (the `agent` policy's two counted classes)."""

    def __init__(
        self, outcome: Outcome, answer: GatewayResponse, retry_after: int | None = None
    ) -> None:
        super().__init__(outcome.detail)
        self.outcome = outcome
        self.answer = answer
        self.retry_after = retry_after


#: Transitions that end a probe another replica sent: waiters here ask the engine again.
_PROBE_ENDS = frozenset({ev.RECOVERED, ev.REOPENED, ev.RESET})


class GatewayApp:
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
        self._shared_lost = shared_lost
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._halted_cache: dict[_Shape, _Encoded] = {}
        self.counts = Counts()
        self.calls = Calls(engine, self.policy, speed, counts=self.counts, listener=self._on_event)
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
            table.probe_wait_seconds,
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
        self.calls.close()
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
            self._loop.call_soon_threadsafe(self.calls.reset_seen, event.key)

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
        call = self.calls.open(agent, platform.name, platform.deadline)
        admission = await self.calls.admit(call, platform.lease, platform.probe_wait_seconds)
        if not admission.allowed:
            start, halted = self._halted(admission, call)
            await send(start)
            await send(halted)
            return
        url = upstream_url(platform.base, target[1], scope["query_string"])
        await self._call(scope, receive, send, call, platform, url, declared != 0)

    def _halted(self, admission: Admission, call: Call) -> tuple[Message, Message]:
        """403 `agent_halted`: the fast-fail path, as its two messages (the caller sends them:
        no coroutine of its own). Its headers and body message are made once per (reason,
        cause, whole seconds left) and reused until the second changes; a refusal allocates
        only its call id and the start message."""
        shape = (admission.reason, admission.cause, math.ceil(admission.retry_after))
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
            await _answer(send, 200, body)
        elif path == "/-/metrics":
            text = await asyncio.to_thread(generate_latest, self.registry)
            headers = [(b"content-type", CONTENT_TYPE_LATEST.encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": text})
        else:
            await _answer(send, 404, {"error": "not_found"})

    # -- the call ------------------------------------------------------------------------

    async def _call(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        call: Call,
        platform: Platform,
        url: str,
        has_body: bool,
    ) -> None:
        """The call from the breaker's admission to its completion and the relayed answer.

        The agent's connection is watched throughout: when the agent leaves, this task is
        cancelled, so the platform's request or stream is closed at once, not pulled to its
        end. A cancellation that is not the agent leaving is the drain's end (SIGTERM)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        attempt = _Attempt()
        body = RequestBody(receive, self.body_limit, self.replay_limit, self.idle)
        cut = _Cut(scope)
        held: aiohttp.ClientResponse | None = None
        try:
            try:
                cut.arm()
                response, outcome = await self._exchange(
                    scope, call, platform, url, body, has_body, attempt
                )
                cut.disarm()
            except UploadProblem as problem:
                cut.disarm()
                await self._upload_refused(send, call, problem, attempt)
                return
            except _Failed as failed:
                cut.disarm()
                self.counts.observe(call.key, (loop.time() - started) * self.speed)
                await self._complete(call, failed.outcome, attempt, failed.answer.status)
                extra = None
                if failed.retry_after is not None:
                    extra = [(b"retry-after", b"%d" % failed.retry_after)]
                await _answer(send, failed.answer.status, failed.answer.body, call, extra)
                return
            except asyncio.CancelledError:
                if not cut.uncancel():
                    raise
                await self._cut_before_head(send, call, attempt, cut)
                return
            held = response
            self.counts.observe(call.key, (loop.time() - started) * self.speed)
            await self._complete(call, outcome, attempt, response.status)
            cut.arm()
            await self._stream_back(send, response, call, cut)
        finally:
            cut.stop()
            if held is not None:
                held.close() if cut.happened else held.release()
            if attempt.slot:
                self.slots.give_back(call.agent)

    async def _complete(
        self, call: Call, outcome: Outcome, attempt: _Attempt, agent_status: int
    ) -> None:
        await self.calls.complete(
            call,
            outcome,
            fault=attempt.fault,
            agent_status=agent_status,
            refresh=attempt.refresh,
            platform_status=attempt.platform_status,
        )

    async def _cut_before_head(self, send: Send, call: Call, attempt: _Attempt, cut: _Cut) -> None:
        """The call ended before the platform's head: the agent left (uncounted, nobody to
        answer), or the drain ran out (the gateway's own condition, answered and audited)."""
        if cut.agent_left:
            outcome = Outcome(OutcomeClass.CALLER_ERROR, detail="client_closed")
            await self._complete(call, outcome, attempt, 499)
            return
        detail = "the gateway is shutting down and its drain ran out before the platform answered"
        outcome = Outcome(OutcomeClass.GATEWAY_BUSY, detail=detail)
        await self._complete(call, outcome, attempt, 503)
        with contextlib.suppress(OSError):
            await _answer(send, 503, {"error": "gateway_stopping", "message": detail}, call)

    async def _stream_back(
        self, send: Send, response: aiohttp.ClientResponse, call: Call, cut: _Cut
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

    async def _exchange(
        self,
        scope: Scope,
        call: Call,
        platform: Platform,
        url: str,
        body: RequestBody,
        has_body: bool,
        attempt: _Attempt,
    ) -> tuple[aiohttp.ClientResponse, Outcome]:
        """The body's first bytes, the credential, a connection slot, the request, and on a
        rejected credential one refresh and retry: the response whose head decided the
        outcome, or `_Failed`."""
        if has_body:
            await body.start()
        else:
            body.no_body()
        if self.calls.was_reset(call.key):
            # The operator fixed something: read the agent's file and command credentials again.
            self.vault.forget(call.agent)
        try:
            credential = self.vault.held(call.agent, platform.name) or await self.vault.fetch(
                call.agent, platform.name, platform.real_deadline
            )
        except VaultUnavailable as error:
            attempt.fault = "vault_down"
            detail = f"the credential vault is unreachable: {error}"
            raise _upstream(platform.name, detail) from None
        if not self.slots.try_take(call.agent):
            try:
                await self.slots.take(call.agent, SLOT_WAIT_SECONDS)
            except Busy as busy:
                raise _busy(busy.limit) from None
        attempt.slot = True
        key = self._idempotency_key(scope["headers"], call)
        first = await self._send(scope, call, platform, url, body, credential, key, attempt, 1)
        if first.status not in platform.auth_statuses:
            return first, agent_outcome_for_response(first.status)
        refreshed = await self._refresh(call, platform, credential)
        attempt.refresh = "failed" if refreshed is None else "ok"
        if refreshed is None:
            first.release()
            raise _auth_failed(platform.name, self._refresh_failure(call, platform))
        if not body.replayable:
            # Too big to send again: the platform's answer goes back as it came, uncounted.
            outcome = Outcome(OutcomeClass.UPSTREAM_ERROR, detail="not replayed: body too big")
            return first, outcome
        first.release()
        second = await self._send(scope, call, platform, url, body, refreshed, key, attempt, 2)
        if second.status in platform.auth_statuses:
            second.release()
            raise _auth_failed(platform.name, "succeeded but the new token was rejected too")
        return second, agent_outcome_for_response(second.status)

    def _refresh_failure(self, call: Call, platform: Platform) -> str:
        """What the 401's message and the audit line say about a refresh that failed."""
        if self.vault.is_env(call.agent, platform.name):
            return (
                "failed: an env credential is read once, at start (a new value needs a "
                "restart of the gateway)"
            )
        return "failed"

    def _idempotency_key(self, headers: Iterable[tuple[bytes, bytes]], call: Call) -> str:
        """The agent's own key, scoped to the agent (two agents' `1` are different calls),
        or else the call's."""
        for name, own in headers:
            if name == b"idempotency-key":
                return f"{call.agent}/{own.decode('latin-1')}"
        return self.calls.idempotency_key(call)

    async def _send(
        self,
        scope: Scope,
        call: Call,
        platform: Platform,
        url: str,
        body: RequestBody,
        credential: str,
        key: str,
        attempt: _Attempt,
        number: int,
    ) -> aiohttp.ClientResponse:
        data = body.for_attempt(number)
        headers = forwarded_headers(scope["headers"], streamed=not isinstance(data, bytes | None))
        headers += [("Authorization", f"Bearer {credential}"), ("Idempotency-Key", key)]
        call.attempts += 1
        loop = asyncio.get_running_loop()
        real_deadline = platform.real_deadline
        try:
            async with asyncio.timeout(real_deadline) as deadline:
                # While the agent uploads, its idle timeout rules; the deadline for the
                # response head runs from the last request byte.
                body.on_progress = lambda done: deadline.reschedule(
                    loop.time() + real_deadline if done else None
                )
                response = await self.session().request(
                    scope["method"],
                    URL(url, encoded=True),
                    headers=headers,
                    data=data,
                    allow_redirects=False,
                )
        except Exception as error:
            if body.problem is not None:
                raise body.problem from None
            if not isinstance(error, aiohttp.ClientError | TimeoutError | OSError):
                raise
            attempt.fault, detail = fault_and_detail(error, platform.name, platform.deadline)
            attempt.platform_status = None
            raise _upstream(call.platform, detail) from None
        finally:
            body.on_progress = None
        attempt.fault = f"http_{response.status}"
        attempt.platform_status = response.status
        return response

    async def _refresh(self, call: Call, platform: Platform, old: str) -> str | None:
        """A new credential: the OAuth 2.0 refresh-token grant where the platform has a
        `token_url`, else the source read again. None when that failed, or gave back the
        credential just rejected (DESIGN: no retry is sent with it)."""
        renewed = await self._renew(call, platform)
        return None if renewed == old else renewed

    async def _renew(self, call: Call, platform: Platform) -> str | None:
        deadline = platform.real_deadline
        try:
            if platform.token_url is None:
                return await self.vault.reread(call.agent, platform.name, deadline)
            form = await self.vault.refresh_grant_form(call.agent, platform.name, deadline)
            async with asyncio.timeout(deadline):
                response = await self.session().post(
                    platform.token_url, data=form, allow_redirects=False
                )
                async with response:
                    answer = await response.json(content_type=None) if response.ok else None
        except (VaultUnavailable, aiohttp.ClientError, TimeoutError, OSError, ValueError):
            return None
        return self.vault.granted_token(call.agent, platform.name, answer)

    async def _upload_refused(
        self, send: Send, call: Call, problem: UploadProblem, attempt: _Attempt
    ) -> None:
        """413 for a body that overran the limit, 408 for one that stalled: the agent's to
        fix, recorded uncounted (a probe's slot is freed)."""
        outcome = Outcome(OutcomeClass.CALLER_ERROR, detail=problem.error)
        await self.calls.complete(
            call,
            outcome,
            fault="none",
            agent_status=problem.status,
            refresh=attempt.refresh,
            platform_status=None,
        )
        if problem.status != 499:
            with contextlib.suppress(OSError):
                await _answer(send, problem.status, {"error": problem.error}, call)


class _Cut:
    """The agent's connection, watched for the length of one call (DESIGN: an upstream
    request and response end when their agent disconnects). When the agent leaves, the
    call's task is cancelled; `uncancel` tells that cancellation (or the drain's end) from
    any other, and `abort` drops a connection whose answer cannot be finished."""

    __slots__ = ("_armed", "_connection", "_task", "agent_left", "happened")

    def __init__(self, scope: Scope) -> None:
        self._connection: BoundedProtocol | None = scope.get(EXTENSION)
        self._task = asyncio.current_task()
        self._armed = False
        self.agent_left = False
        self.happened = False
        if self._connection is not None:
            self._connection.watch(self._left)

    def arm(self) -> None:
        """From here the agent's leaving cuts the call short (the exchange, the stream); the
        bookkeeping between them (the completion) is never cut (`disarm`)."""
        self._armed = True
        if self.agent_left:
            self._left()

    def disarm(self) -> None:
        self._armed = False

    def _left(self) -> None:
        self.agent_left = True
        if self._armed and self._task is not None:
            self._armed = False
            self._task.cancel()

    def uncancel(self) -> bool:
        """After a `CancelledError` in the call: True when it was the agent leaving or the
        drain's end (the call ends quietly, its upstream side closed), False to re-raise."""
        task = self._task
        if task is None or not (self.agent_left or task.cancelling()):
            return False
        task.uncancel()
        self.happened = True
        return True

    def write_paused(self) -> bool:
        return self._connection is not None and self._connection.write_paused

    def abort(self) -> None:
        self.happened = True
        if self._connection is not None and not self.agent_left:
            self._connection.abort()

    def stop(self) -> None:
        if self._connection is not None:
            self._connection.watch(None)


def _busy(limit: str) -> _Failed:
    """No connection slot within the wait: the gateway's own condition, never counted."""
    detail = f"the gateway has no free connection to the platform ({limit})"
    outcome = Outcome(OutcomeClass.GATEWAY_BUSY, detail=detail)
    body = {"error": "gateway_busy", "limit": limit, "retry_after_seconds": 1}
    return _Failed(outcome, GatewayResponse(503, body), retry_after=1)


def _upstream(platform: str, detail: str) -> _Failed:
    outcome = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail=detail)
    return _Failed(outcome, results.upstream_failure(platform, detail))


def _auth_failed(platform: str, refresh: str) -> _Failed:
    detail = f"{platform} rejected the credential; refresh {refresh}"
    outcome = Outcome(OutcomeClass.AUTH_FAILURE, counted=True, detail=detail)
    return _Failed(outcome, results.reauth_failed(platform, refresh))


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
