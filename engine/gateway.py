"""The credential-holding gateway's call path (`agent` policy): one breaker per agent.

The gateway fetches the agent's stored credential, calls the platform with a deadline, refreshes
the token once on 401/403, and answers the agent with the design's statuses and bodies: the
platform's own answer relayed, 401 `reauth_failed`, 502 when the call could not be completed,
403 `agent_halted` when the breaker refuses.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from breakerdeck.engine import results
from breakerdeck.engine.classify import (
    agent_outcome_for_response,
    describe_error,
    fault_of,
    network_fault,
    response_json,
)
from breakerdeck.engine.engine import Call, Engine
from breakerdeck.engine.errors import VaultUnavailable
from breakerdeck.engine.harness import Refusal, json_body, json_headers
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.policy import AgentPolicy
from breakerdeck.engine.results import GatewayResponse

REFRESH_PATH = "/oauth/token"

_AUTH_REJECTED = frozenset({401, 403})


class Vault(Protocol):
    async def fetch(self, agent: str, platform: str) -> str: ...


#: Decides whether the gateway serves this request at all (signature, scopes, approvals).
GatewayAuthorizer = Callable[[str, str, Any], Refusal | None]


@dataclass(slots=True)
class _Exchange:
    """What the platform did on the last attempt, for the call's line."""

    fault: str = "none"
    platform_status: int | None = None
    refresh: str | None = None


class Gateway:
    def __init__(
        self,
        engine: Engine,
        clients: Mapping[str, httpx.AsyncClient],
        vault: Vault,
        *,
        authorize: GatewayAuthorizer | None = None,
    ) -> None:
        if not isinstance(engine.policy, AgentPolicy):
            raise TypeError("the gateway runs the 'agent' policy; this engine runs 'tool'")
        self.engine = engine
        self.policy: AgentPolicy = engine.policy
        self.clients = dict(clients)
        self.vault = vault
        self.authorize = authorize

    async def call(
        self,
        agent: str,
        platform: str,
        *,
        method: str = "POST",
        path: str = "/",
        json: Any = None,
        tool: str = "",
    ) -> GatewayResponse:
        if platform not in self.clients:
            known = ", ".join(sorted(self.clients))
            return GatewayResponse(
                404,
                {
                    "error": "unknown_platform",
                    "message": f"no platform {platform!r}; known: {known}",
                },
            )
        call = self.engine.new_call(
            agent, agent, platform, tool or platform, self.policy.deadline_seconds
        )
        request = _prepare(self.clients[platform].base_url, method, path, json)
        refusal = self._precheck(agent, platform, json, request)
        if refusal is not None:
            response = _refusal_response(refusal)
            outcome = Outcome(refusal.cls, detail=refusal.reason)
            self.engine.refuse(call, outcome, response.status)
            return response
        admission = await self.engine.admit_async(call, self.policy.probe_lease())
        if not admission.allowed:
            return results.agent_halted(admission)
        assert not isinstance(request, Refusal)
        exchange = _Exchange()
        outcome, response = await self._exchange(call, exchange, request)
        await self.engine.complete_async(
            call,
            outcome,
            exchange.fault,
            response.status,
            exchange.refresh,
            exchange.platform_status,
        )
        return response

    def _precheck(
        self, agent: str, platform: str, json: Any, request: _Request | Refusal
    ) -> Refusal | None:
        """The hook's verdict, then the request itself: both before the breaker, so neither
        takes a slot."""
        refusal = self.authorize(agent, platform, json) if self.authorize else None
        if refusal is None and isinstance(request, Refusal):
            return request
        return refusal

    async def _exchange(
        self, call: Call, exchange: _Exchange, request: _Request
    ) -> tuple[Outcome, GatewayResponse]:
        platform = call.platform
        try:
            token = await self._credential(call)
        except VaultUnavailable as error:
            exchange.fault = "vault_down"
            return _upstream(platform, f"the credential vault is unreachable: {error}")
        sent = await self._send(call, exchange, request, token)
        if isinstance(sent, BaseException):
            return _upstream(platform, describe_error(sent, self.policy.deadline_seconds))
        if sent.status_code not in _AUTH_REJECTED:
            return _relayed(sent)
        refreshed = await self._refresh(platform, token)
        if refreshed is None:
            exchange.refresh = "failed"
            return _auth_failure(platform, "failed")
        exchange.refresh = "ok"
        retried = await self._send(call, exchange, request, refreshed)
        if isinstance(retried, BaseException):
            return _upstream(platform, describe_error(retried, self.policy.deadline_seconds))
        if retried.status_code in _AUTH_REJECTED:
            return _auth_failure(platform, "succeeded but the new token was rejected too")
        return _relayed(retried)

    async def _credential(self, call: Call) -> str:
        """The stored credential, under the policy's deadline: a vault that hangs is
        unavailable (an upstream failure), never a call that holds the probe slot forever."""
        deadline = self.policy.deadline_seconds
        try:
            async with asyncio.timeout(deadline):
                return await self.vault.fetch(call.agent, call.platform)
        except TimeoutError:
            raise VaultUnavailable(f"no answer within {deadline:g} s") from None

    async def _send(
        self, call: Call, exchange: _Exchange, prepared: _Request, token: str
    ) -> httpx.Response | BaseException:
        client = self.clients[call.platform]
        request = client.build_request(
            prepared.method,
            prepared.url,
            content=prepared.content,
            headers={
                **json_headers(prepared.content),
                "Idempotency-Key": self.engine.idempotency_key(call.number),
                "Authorization": f"Bearer {token}",
            },
            timeout=self.policy.deadline_seconds,
        )
        call.attempts += 1
        try:
            async with asyncio.timeout(self.policy.deadline_seconds):
                response = await client.send(request)
        except (httpx.HTTPError, TimeoutError) as error:
            exchange.fault = fault_of(request, network_fault(error))
            exchange.platform_status = None
            return error
        exchange.fault = fault_of(request, f"http_{response.status_code}")
        exchange.platform_status = response.status_code
        return response

    async def _refresh(self, platform: str, token: str) -> str | None:
        client = self.clients[platform]
        try:
            async with asyncio.timeout(self.policy.deadline_seconds):
                response = await client.post(REFRESH_PATH, json={"refresh_token": token})
        except (httpx.HTTPError, TimeoutError):
            return None
        if response.status_code != 200:
            return None
        try:
            new_token = response_json(response)["access_token"]
        except (ValueError, KeyError, TypeError):
            return None
        return new_token if isinstance(new_token, str) else None


@dataclass(frozen=True, slots=True)
class _Request:
    """What every attempt sends, checked and encoded before the breaker is asked."""

    method: str
    url: httpx.URL
    content: bytes | None


#: An HTTP method is a token (RFC 9110 section 9.1); anything else would fail on the wire as a
#: protocol error, counted against a healthy platform.
_METHOD = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")

#: Only the path and query of the caller's target are read from this: never its authority.
_ANY_ORIGIN = "http://target.invalid/"


def _prepare(base: httpx.URL, method: str, path: str, json: Any) -> _Request | Refusal:
    """The request the caller asked for, or why it cannot be sent (the caller's to fix).

    `path` (with its query) is appended to the platform's `base_url` path and can never
    change its scheme, host or port: `//evil`, `@evil` and `http://evil/` are path text, and
    dot segments resolve inside the caller's part, so `..` cannot climb out of `base_url`.
    """
    if not _METHOD.fullmatch(method):
        return Refusal(OutcomeClass.CALLER_ERROR, f"{method!r} is not an HTTP method")
    try:
        relative = httpx.URL(_ANY_ORIGIN + path.lstrip("/"))
    except httpx.InvalidURL as error:
        return Refusal(OutcomeClass.CALLER_ERROR, f"the path cannot be sent: {error}")
    content = json_body(json)
    if isinstance(content, Refusal):
        return content
    url = base.copy_with(raw_path=base.raw_path + relative.raw_path.removeprefix(b"/"))
    return _Request(method, url, content)


def _relayed(response: httpx.Response) -> tuple[Outcome, GatewayResponse]:
    try:
        body = response_json(response)
    except ValueError:
        body = {"body": response.text}
    if not isinstance(body, dict):
        body = {"data": body}
    return agent_outcome_for_response(response.status_code), GatewayResponse(
        response.status_code, body
    )


def _upstream(platform: str, detail: str) -> tuple[Outcome, GatewayResponse]:
    outcome = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail=detail)
    return outcome, results.upstream_failure(platform, detail)


def _auth_failure(platform: str, refresh: str) -> tuple[Outcome, GatewayResponse]:
    detail = f"{platform} rejected the credential; refresh {refresh}"
    outcome = Outcome(OutcomeClass.AUTH_FAILURE, counted=True, detail=detail)
    return outcome, results.reauth_failed(platform, refresh)


def _refusal_response(refusal: Refusal) -> GatewayResponse:
    if refusal.cls is OutcomeClass.PENDING_APPROVAL:
        return GatewayResponse(202, {"status": "pending_approval", "message": refusal.reason})
    if refusal.cls is OutcomeClass.PERMISSION_DENIED:
        return GatewayResponse(403, {"error": "permission_denied", "message": refusal.reason})
    if refusal.cls is OutcomeClass.CALLER_ERROR:
        return GatewayResponse(400, {"error": "invalid_request", "message": refusal.reason})
    return GatewayResponse(401, {"error": "request_refused", "message": refusal.reason})
