"""The credential-holding gateway's call path (`agent` policy): one breaker per agent.

The gateway fetches the agent's stored credential, calls the platform with a deadline, refreshes
the token once on 401/403, and answers the agent with the design's statuses and bodies: the
platform's own answer relayed, 401 `reauth_failed`, 502 when the call could not be completed,
403 `agent_halted` when the breaker refuses.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from breakerdeck.engine import results
from breakerdeck.engine.breaker import Admission
from breakerdeck.engine.callpath import CallPath, Completion, OneAttempt
from breakerdeck.engine.classify import (
    auth_failure,
    describe_error,
    fault_of,
    network_fault,
    relayed,
    response_json,
    upstream_failure,
)
from breakerdeck.engine.deadline import Deadlines
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


class _Exchange(OneAttempt):
    """One gateway call's state: the request it sends (or, when the breaker was refusing, the
    caller's parts, checked only if it lets the call in after all), what the platform did on
    the last attempt, and the answer."""

    __slots__ = (
        "asked",
        "call",
        "fault",
        "outcome",
        "platform_status",
        "refresh",
        "request",
        "response",
    )

    def __init__(self, call: Call, request: _Request | None, asked: tuple[str, str, Any]) -> None:
        """`asked` is the caller's method, path and JSON: read only when `request` is None."""
        self.call = call
        self.request = request
        self.asked = asked
        self.fault = "none"
        self.platform_status: int | None = None
        self.refresh: str | None = None
        self.outcome: Outcome | None = None
        self.response: GatewayResponse | None = None

    def report(self, attempt: tuple[Outcome, GatewayResponse]) -> None:
        self.outcome, self.response = attempt

    def completion(self) -> Completion:
        outcome, response = self.outcome, self.response
        assert outcome is not None and response is not None
        return outcome, self.fault, response.status, self.refresh, self.platform_status

    def answer(self) -> GatewayResponse:
        assert self.response is not None
        return self.response


class Gateway(CallPath[_Exchange, tuple[Outcome, GatewayResponse], GatewayResponse]):
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
        """The hook first, then the request, both before the breaker so neither takes a slot;
        but while the breaker refuses (read without a lock) a refusal needs no request, so it
        is not built: the breaker is asked at once, and the request is checked only if it lets
        the call in after all (its cooldown ended meanwhile)."""
        client = self.clients.get(platform)
        if client is None:
            known = ", ".join(sorted(self.clients))
            return GatewayResponse(
                404,
                {
                    "error": "unknown_platform",
                    "message": f"no platform {platform!r}; known: {known}",
                },
            )
        engine = self.engine
        call = engine.new_call(
            agent, agent, platform, tool or platform, self.policy.deadline_seconds
        )
        asked = (method, path, json)
        refusal = self.authorize(agent, platform, json) if self.authorize else None
        if refusal is not None:
            return self._refusal(call, refusal)
        if engine.breaker(agent).cooling(engine.clock.monotonic()) is not None:
            return await self._run(_Exchange(call, None, asked), self.policy.probe_lease())
        request = _prepare(client.base_url, method, path, json)
        if isinstance(request, Refusal):
            return self._refusal(call, request)
        return await self._run(_Exchange(call, request, asked), self.policy.probe_lease())

    def _refusal(self, call: Call, refusal: Refusal) -> GatewayResponse:
        response = _refusal_response(refusal)
        outcome = Outcome(refusal.cls, detail=refusal.reason)
        return self._refused(call, outcome, response.status, response)

    def _denied(self, exchange: _Exchange, admission: Admission) -> GatewayResponse:
        return results.agent_halted(admission)

    async def _attempt(self, exchange: _Exchange) -> tuple[Outcome, GatewayResponse]:
        """The credential, the request, one refresh and resend on a rejected credential."""
        call = exchange.call
        platform = call.platform
        deadlines = self._loop_deadlines()
        request = exchange.request
        if request is None:
            prepared = _prepare(self.clients[platform].base_url, *exchange.asked)
            if isinstance(prepared, Refusal):
                outcome = Outcome(prepared.cls, detail=prepared.reason)
                return outcome, _refusal_response(prepared)
            request = prepared
        try:
            token = await self._credential(call, deadlines)
        except VaultUnavailable as error:
            exchange.fault = "vault_down"
            return upstream_failure(platform, f"the credential vault is unreachable: {error}")
        sent = await self._send(call, exchange, request, token, deadlines)
        if isinstance(sent, BaseException):
            return upstream_failure(platform, describe_error(sent, self.policy.deadline_seconds))
        if sent.status_code not in _AUTH_REJECTED:
            return relayed(sent)
        refreshed = await self._refresh(platform, token, deadlines)
        if refreshed is None:
            exchange.refresh = "failed"
            return auth_failure(platform, "failed")
        exchange.refresh = "ok"
        retried = await self._send(call, exchange, request, refreshed, deadlines)
        if isinstance(retried, BaseException):
            return upstream_failure(platform, describe_error(retried, self.policy.deadline_seconds))
        if retried.status_code in _AUTH_REJECTED:
            return auth_failure(platform, "succeeded but the new token was rejected too")
        return relayed(retried)

    async def _credential(self, call: Call, deadlines: Deadlines) -> str:
        """The stored credential, under the policy's deadline: a vault that hangs is
        unavailable (an upstream failure), never a call that holds the probe slot forever."""
        deadline = self.policy.deadline_seconds
        try:
            return await deadlines.run(deadline, self.vault.fetch(call.agent, call.platform))
        except TimeoutError:
            raise VaultUnavailable(f"no answer within {deadline:g} s") from None

    async def _send(
        self,
        call: Call,
        exchange: _Exchange,
        prepared: _Request,
        token: str,
        deadlines: Deadlines,
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
            response = await deadlines.run(self.policy.deadline_seconds, client.send(request))
        except (httpx.HTTPError, TimeoutError) as error:
            exchange.fault = fault_of(request, network_fault(error))
            exchange.platform_status = None
            return error
        exchange.fault = fault_of(request, f"http_{response.status_code}")
        exchange.platform_status = response.status_code
        return response

    async def _refresh(self, platform: str, token: str, deadlines: Deadlines) -> str | None:
        client = self.clients[platform]
        refresh = client.post(REFRESH_PATH, json={"refresh_token": token})
        try:
            response = await deadlines.run(self.policy.deadline_seconds, refresh)
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


def _refusal_response(refusal: Refusal) -> GatewayResponse:
    if refusal.cls is OutcomeClass.PENDING_APPROVAL:
        return GatewayResponse(202, {"status": "pending_approval", "message": refusal.reason})
    if refusal.cls is OutcomeClass.PERMISSION_DENIED:
        return GatewayResponse(403, {"error": "permission_denied", "message": refusal.reason})
    if refusal.cls is OutcomeClass.CALLER_ERROR:
        return GatewayResponse(400, {"error": "invalid_request", "message": refusal.reason})
    return GatewayResponse(401, {"error": "request_refused", "message": refusal.reason})
