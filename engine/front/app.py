"""`breakerdeck gateway` as an ASGI app: the `agent` policy on HTTP (DESIGN, "Front doors").

An agent calls `METHOD /p/<platform>/<path>?<query>` with its bearer token. Refusals come
first, in the design's order, and none of them counts, reaches a platform or carries a call id:
401 `unauthenticated`, 404 `unknown_platform`, 403 `permission_denied`, 413 `body_too_large`.
Then the breaker (403 `agent_halted`), then the call: the credential under its deadline, the
request, one refresh and retry on 401/403, the outcome decided at the response head, and the
platform's answer streamed back as it came.
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
from breakerdeck.engine.front.relay import (
    RequestBody,
    UploadProblem,
    fault_and_detail,
    forwarded_headers,
    new_session,
    relayed_headers,
)
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
_AUTH_REJECTED = frozenset({401, 403})
_BEARER = b"bearer "
#: A relayed body of known length up to this size is read whole and sent in one message.
_READ_WHOLE = 65_536
#: A refusal's shape (reason, cause, whole seconds left) and its encoded headers and body.
_Shape = tuple[Any, Any, int]
_Encoded = tuple[tuple[tuple[bytes, bytes], ...], Message]


@dataclass(frozen=True, slots=True)
class Platform:
    name: str
    base: Base
    token_url: str | None
    probe_wait_seconds: float


@dataclass(slots=True)
class _Attempt:
    """What the last attempt did, for the call's line."""

    fault: str = "none"
    platform_status: int | None = None
    refresh: str | None = None


class _Failed(Exception):
    """The call could not be completed: an upstream failure, or an auth failure after the
    refresh (the `agent` policy's two counted classes)."""

    def __init__(self, outcome: Outcome, answer: GatewayResponse) -> None:
        super().__init__(outcome.detail)
        self.outcome = outcome
        self.answer = answer


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
    ) -> None:
        if not isinstance(engine.policy, AgentPolicy):
            raise TypeError("the gateway runs the 'agent' policy")
        self.engine = engine
        self.policy: AgentPolicy = engine.policy
        self.speed = speed
        self.vault = Vault(config, Path(config_path))
        self.platforms = {
            name: Platform(name, Base.parse(t.base_url), t.token_url, t.probe_wait_seconds)
            for name, t in config.platforms.items()
        }
        self._tokens = [(bytes.fromhex(d), agent) for agent, d in sorted(digests.items())]
        self.body_limit = config.gateway.body_limit_bytes
        self.replay_limit = config.gateway.replay_buffer_bytes
        #: The policy's deadline in real seconds (the engine's clock may be sped up).
        self.deadline = self.policy.deadline_seconds / speed
        self._shared_lost = shared_lost
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._halted_cache: dict[_Shape, _Encoded] = {}
        self.counts = Counts()
        self.calls = Calls(engine, self.policy, speed, counts=self.counts, listener=self._on_event)
        self.registry = registry_for(engine, self.counts)

    def __repr__(self) -> str:
        return f"GatewayApp({sorted(self.platforms)}, {len(self._tokens)} agents)"

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
            self._session = new_session(self.deadline, self.deadline)
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
        call = self.calls.open(agent, platform.name)
        admission = await self.calls.admit(call, platform.probe_wait_seconds)
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
        loop = asyncio.get_running_loop()
        started = loop.time()
        attempt = _Attempt()
        body = RequestBody(receive, self.body_limit, self.replay_limit, self.deadline)
        response: aiohttp.ClientResponse | None = None
        try:
            if has_body:
                await body.start()
            else:
                body.no_body()
            response, outcome = await self._exchange(scope, call, platform, url, body, attempt)
        except UploadProblem as problem:
            await self._upload_refused(send, call, problem, attempt)
            return
        except _Failed as failed:
            self.counts.observe(call.key, (loop.time() - started) * self.speed)
            await self.calls.complete(
                call,
                failed.outcome,
                fault=attempt.fault,
                agent_status=failed.answer.status,
                refresh=attempt.refresh,
                platform_status=attempt.platform_status,
            )
            await _answer(send, failed.answer.status, failed.answer.body, call)
            return
        self.counts.observe(call.key, (loop.time() - started) * self.speed)
        try:
            await self.calls.complete(
                call,
                outcome,
                fault=attempt.fault,
                agent_status=response.status,
                refresh=attempt.refresh,
                platform_status=response.status,
            )
            await _stream_back(send, response, call)
        finally:
            response.release()

    async def _exchange(
        self,
        scope: Scope,
        call: Call,
        platform: Platform,
        url: str,
        body: RequestBody,
        attempt: _Attempt,
    ) -> tuple[aiohttp.ClientResponse, Outcome]:
        """The credential, the request, and on 401/403 one refresh and retry: the response
        whose head decided the outcome, or `_Failed`."""
        if self.calls.was_reset(call.key):
            # The operator fixed something: read the agent's file and command credentials again.
            self.vault.forget(call.agent)
        try:
            credential = self.vault.held(call.agent, platform.name) or await self.vault.fetch(
                call.agent, platform.name, self.deadline
            )
        except VaultUnavailable as error:
            attempt.fault = "vault_down"
            detail = f"the credential vault is unreachable: {error}"
            raise _upstream(platform.name, detail) from None
        key = self._idempotency_key(scope["headers"], call)
        first = await self._send(scope, call, url, body, credential, key, attempt, 1)
        if first.status not in _AUTH_REJECTED:
            return first, agent_outcome_for_response(first.status)
        refreshed = await self._refresh(call, platform)
        attempt.refresh = "failed" if refreshed is None else "ok"
        if refreshed is None:
            first.release()
            raise _auth_failed(platform.name, "failed")
        if not body.replayable:
            # Too big to send again: the platform's answer goes back as it came, uncounted.
            outcome = Outcome(OutcomeClass.UPSTREAM_ERROR, detail="not replayed: body too big")
            return first, outcome
        first.release()
        second = await self._send(scope, call, url, body, refreshed, key, attempt, 2)
        if second.status in _AUTH_REJECTED:
            second.release()
            raise _auth_failed(platform.name, "succeeded but the new token was rejected too")
        return second, agent_outcome_for_response(second.status)

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
        try:
            async with asyncio.timeout(self.deadline) as deadline:
                # While the agent uploads, its idle timeout rules; the deadline for the
                # response head runs from the last request byte.
                body.on_progress = lambda done: deadline.reschedule(
                    loop.time() + self.deadline if done else None
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
            attempt.fault, detail = fault_and_detail(error, self.policy.deadline_seconds)
            attempt.platform_status = None
            raise _upstream(call.platform, detail) from None
        finally:
            body.on_progress = None
        attempt.fault = f"http_{response.status}"
        attempt.platform_status = response.status
        return response

    async def _refresh(self, call: Call, platform: Platform) -> str | None:
        """A new credential: the OAuth 2.0 refresh-token grant where the platform has a
        `token_url`, else the source read again. None when that failed."""
        try:
            if platform.token_url is None:
                return await self.vault.reread(call.agent, platform.name, self.deadline)
            form = await self.vault.refresh_grant_form(call.agent, platform.name, self.deadline)
            async with asyncio.timeout(self.deadline):
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


async def _stream_back(send: Send, response: aiohttp.ClientResponse, call: Call) -> None:
    """The platform's answer as it came, chunk by chunk (an SSE event reaches the agent when
    the platform sends it). A platform that stops mid-body ends the agent's response short:
    the connection is closed without the rest, as the platform did."""
    headers = relayed_headers(response.raw_headers)
    headers.append((CALL_HEADER, call.call_id.encode()))
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    length = response.content_length
    try:
        if length is not None and length <= _READ_WHOLE:
            # A small body of known length goes back in one message (one write).
            await send({"type": "http.response.body", "body": await response.read()})
            return
        async for chunk in response.content.iter_any():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
    except (aiohttp.ClientError, TimeoutError, OSError) as error:
        log.info("%s: the platform's body stopped: %s", call.call_id, type(error).__name__)
        return
    await send({"type": "http.response.body", "body": b""})
