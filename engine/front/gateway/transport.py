"""The agent exchange's aiohttp transport: one ASGI gateway call's I/O with its platform.

`engine.exchange` decides the steps and what each result means; this does them on the wire:
the credential as held (or fetched under the platform's real-seconds deadline), a connection
slot (bounded per agent and in total), the agent's request with its streamed body, and the
refresh (the OAuth 2.0 refresh-token grant where the platform names a `token_url`, else the
source read again).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import aiohttp
from yarl import URL

from breakerdeck.engine import telemetry
from breakerdeck.engine.calls.exchange import Unsent, busy
from breakerdeck.engine.engine import Call, Engine
from breakerdeck.engine.errors import VaultUnavailable
from breakerdeck.engine.front.gateway.credentials import Vault
from breakerdeck.engine.front.gateway.relay import RequestBody, fault_and_detail, forwarded_headers
from breakerdeck.engine.front.gateway.slots import Busy, Slots
from breakerdeck.engine.front.gateway.urls import Base

#: How long a call waits for a connection slot before it is answered `gateway_busy`.
SLOT_WAIT_SECONDS = 1.0

_ENV_REFRESH = (
    "failed: an env credential is read once, at start (a new value needs a restart of the gateway)"
)


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


class Upstreams:
    """What every call's transport shares: the client session, the vault, the slots, and which
    keys were reset since their last call (the operator fixed something: the agent's file and
    command credentials are read again)."""

    def __init__(
        self,
        engine: Engine,
        vault: Vault,
        slots: Slots,
        session: Callable[[], aiohttp.ClientSession],
    ) -> None:
        self.engine = engine
        self.vault = vault
        self.slots = slots
        self.session = session
        self._resets_seen: dict[str, int] = {}

    def was_reset(self, key: str) -> bool:
        """Whether the key was reset since the last time this was asked (an integer compare:
        the engine counts its resets)."""
        resets = self.engine.tally(key, "reset")
        if resets == self._resets_seen.get(key, 0):
            return False
        self._resets_seen[key] = resets
        return True


class PlatformCall:
    """One call's `Transport[aiohttp.ClientResponse]`; `slot` says whether it holds one."""

    __slots__ = (
        "auth_statuses",
        "body",
        "call",
        "headers",
        "key",
        "method",
        "platform",
        "shared",
        "slot",
        "target",
        "url",
    )

    def __init__(
        self,
        shared: Upstreams,
        call: Call,
        target: Platform,
        scope: dict[str, Any],
        url: str,
        body: RequestBody,
    ) -> None:
        self.shared = shared
        self.call = call
        self.target = target
        self.platform = target.name
        self.auth_statuses = target.auth_statuses
        self.method: str = scope["method"]
        self.headers: list[tuple[bytes, bytes]] = scope["headers"]
        self.url = url
        self.body = body
        self.key = _idempotency_key(shared.engine, self.headers, call)
        self.slot = False

    def held(self) -> str | None:
        call, vault = self.call, self.shared.vault
        if self.shared.was_reset(call.key):
            vault.forget(call.agent)
        return vault.held(call.agent, self.platform)

    async def fetch(self) -> str:
        return await self.shared.vault.fetch(
            self.call.agent, self.platform, self.target.real_deadline
        )

    def connect(self) -> Awaitable[None] | None:
        if self.shared.slots.try_take(self.call.agent):
            self.slot = True
            return None
        return self._wait_for_slot()

    async def _wait_for_slot(self) -> None:
        try:
            await self.shared.slots.take(self.call.agent, SLOT_WAIT_SECONDS)
        except Busy as full:
            raise busy(full.limit) from None
        self.slot = True

    async def send(self, credential: str, attempt: int) -> aiohttp.ClientResponse:
        body = self.body
        data = body.for_attempt(attempt)
        headers = forwarded_headers(self.headers, streamed=not isinstance(data, bytes | None))
        headers += [("Authorization", f"Bearer {credential}"), ("Idempotency-Key", self.key)]
        spans = telemetry.spans()
        if spans is not None:
            spans.outbound(headers)
        loop = asyncio.get_running_loop()
        real_deadline = self.target.real_deadline
        try:
            async with asyncio.timeout(real_deadline) as deadline:
                # While the agent uploads, its idle timeout rules; the deadline for the
                # response head runs from the last request byte.
                body.on_progress = lambda done: deadline.reschedule(
                    loop.time() + real_deadline if done else None
                )
                return await self.shared.session().request(
                    self.method,
                    URL(self.url, encoded=True),
                    headers=headers,
                    data=data,
                    allow_redirects=False,
                )
        except Exception as error:
            if body.problem is not None:
                raise body.problem from None
            if not isinstance(error, aiohttp.ClientError | TimeoutError | OSError):
                raise
            raise Unsent(*fault_and_detail(error, self.platform, self.target.deadline)) from None
        finally:
            body.on_progress = None

    def status(self, response: aiohttp.ClientResponse) -> int:
        return response.status

    def fault(self, response: aiohttp.ClientResponse) -> str:
        return f"http_{response.status}"

    async def renew(self, rejected: str) -> str | None:
        agent, platform, vault = self.call.agent, self.platform, self.shared.vault
        deadline = self.target.real_deadline
        token_url = self.target.token_url
        try:
            if token_url is None:
                return await vault.reread(agent, platform, deadline)
            form = await vault.refresh_grant_form(agent, platform, deadline)
            async with asyncio.timeout(deadline):
                response = await self.shared.session().post(
                    token_url, data=form, allow_redirects=False
                )
                async with response:
                    answer = await response.json(content_type=None) if response.ok else None
        except (VaultUnavailable, aiohttp.ClientError, TimeoutError, OSError, ValueError):
            return None
        return vault.granted_token(agent, platform, answer)

    def refresh_failure(self) -> str:
        if self.shared.vault.is_env(self.call.agent, self.platform):
            return _ENV_REFRESH
        return "failed"

    def replayable(self) -> bool:
        return self.body.replayable

    def release(self, response: aiohttp.ClientResponse) -> None:
        response.release()


def _idempotency_key(engine: Engine, headers: Iterable[tuple[bytes, bytes]], call: Call) -> str:
    """The agent's own key, scoped to the agent (two agents' `1` are different calls), or else
    the call's."""
    for name, own in headers:
        if name == b"idempotency-key":
            return f"{call.agent}/{own.decode('latin-1')}"
    return engine.idempotency_key(call.number)
