"""The credential-holding gateway in-process (`agent` policy): one breaker per agent.

The call runs on `CallPath._run`, and its one attempt is the agent exchange that the ASGI
gateway runs too (`engine.exchange`: the stored credential, the request under a deadline, one
refresh and resend on 401/403), here on an httpx transport: so the simulation, the headless
trace and the console run a production gateway's rules. The agent gets the design's statuses
and bodies: the platform's own answer relayed, 401 `reauth_failed`, 502 when the call could not
be completed, 403 `agent_halted` when the breaker refuses.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from breakerdeck.engine import results
from breakerdeck.engine.calls.callpath import CallPath
from breakerdeck.engine.calls.deadline import Deadlines
from breakerdeck.engine.calls.exchange import Exchange, Failed, Unsent
from breakerdeck.engine.calls.urls import Base, upstream_url
from breakerdeck.engine.core.breaker import Admission
from breakerdeck.engine.core.classify import describe_error, fault_of, network_fault, response_json
from breakerdeck.engine.engine import Call, Engine
from breakerdeck.engine.errors import VaultUnavailable
from breakerdeck.engine.harness import Refusal, json_body, json_headers
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.policy import AgentPolicy
from breakerdeck.engine.results import GatewayResponse

REFRESH_PATH = "/oauth/token"

#: The in-process gateway reads both as a rejected credential (DESIGN's default).
AUTH_REJECTED = frozenset({401, 403})


class Vault(Protocol):
    async def fetch(self, agent: str, platform: str) -> str: ...


#: Decides whether the gateway serves this request at all (signature, scopes, approvals).
GatewayAuthorizer = Callable[[str, str, Any], Refusal | None]


class _Call(Exchange):
    """One gateway call: the request it sends (or, when the breaker was refusing, the caller's
    parts, checked only if it lets the call in after all), and the answer."""

    __slots__ = ("asked", "request", "response")

    def __init__(self, call: Call, request: _Request | None, asked: tuple[str, str, Any]) -> None:
        """`asked` is the caller's method, path and JSON: read only when `request` is None."""
        super().__init__(call)
        self.request = request
        self.asked = asked
        self.response: GatewayResponse | None = None

    def report(self, attempt: GatewayResponse) -> bool:
        self.response = attempt
        return False

    def answer(self) -> GatewayResponse:
        assert self.response is not None
        return self.response


class Gateway(CallPath[_Call, GatewayResponse, GatewayResponse]):
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
        call = engine.enter(agent, agent, platform, tool or platform, self.policy.deadline_seconds)
        asked = (method, path, json)
        refusal = self.authorize(agent, platform, json) if self.authorize else None
        if refusal is not None:
            return self._refusal(call, refusal)
        if engine.cooling(agent):
            return await self._run(_Call(call, None, asked), self.policy.probe_lease())
        request = _prepare(client.base_url, method, path, json)
        if isinstance(request, Refusal):
            return self._refusal(call, request)
        return await self._run(_Call(call, request, asked), self.policy.probe_lease())

    def _refusal(self, call: Call, refusal: Refusal) -> GatewayResponse:
        response = _refusal_response(refusal)
        outcome = Outcome(refusal.cls, detail=refusal.reason)
        return self._refused(call, outcome, response.status, response)

    def _denied(self, exchange: _Call, admission: Admission) -> GatewayResponse:
        return results.agent_halted(admission)

    async def _attempt(self, exchange: _Call) -> GatewayResponse:
        """The agent exchange (`engine.exchange`) on httpx; the platform's answer is read
        whole and relayed as JSON."""
        request = exchange.request
        if request is None:
            prepared = _prepare(self.clients[exchange.call.platform].base_url, *exchange.asked)
            if isinstance(prepared, Refusal):
                refused = _refusal_response(prepared)
                exchange.decide(Outcome(prepared.cls, detail=prepared.reason), refused.status)
                return refused
            request = prepared
        transport = _Httpx(self, exchange.call, request, self._loop_deadlines())
        try:
            response = await exchange.run(transport)
        except Failed as failed:
            return failed.answer
        return _relayed(response)


class _Httpx:
    """One call's `Transport[httpx.Response]`: the vault and the platform's client, each under
    the policy's deadline."""

    __slots__ = ("call", "client", "deadlines", "gateway", "platform", "request")

    auth_statuses = AUTH_REJECTED

    def __init__(
        self, gateway: Gateway, call: Call, request: _Request, deadlines: Deadlines
    ) -> None:
        self.gateway = gateway
        self.call = call
        self.platform = call.platform
        self.client = gateway.clients[call.platform]
        self.request = request
        self.deadlines = deadlines

    def held(self) -> None:
        """None: the vault is asked on every call (the fixture counts its fetches)."""

    async def fetch(self) -> str:
        """The stored credential, under the policy's deadline: a vault that hangs is
        unavailable (an upstream failure), never a call that holds the probe slot forever."""
        deadline = self.gateway.policy.deadline_seconds
        fetch = self.gateway.vault.fetch(self.call.agent, self.platform)
        try:
            return await self.deadlines.run(deadline, fetch)
        except TimeoutError:
            raise VaultUnavailable(f"no answer within {deadline:g} s") from None

    def connect(self) -> None:
        """httpx's pool is the client's own: nothing to take."""

    async def send(self, credential: str, attempt: int) -> httpx.Response:
        prepared, deadline = self.request, self.gateway.policy.deadline_seconds
        request = self.client.build_request(
            prepared.method,
            prepared.url,
            content=prepared.content,
            headers={
                **json_headers(prepared.content),
                "Idempotency-Key": self.gateway.engine.idempotency_key(self.call.number),
                "Authorization": f"Bearer {credential}",
            },
            timeout=deadline,
        )
        try:
            return await self.deadlines.run(deadline, self.client.send(request))
        except (httpx.HTTPError, TimeoutError) as error:
            fault = fault_of(request, network_fault(error))
            raise Unsent(fault, describe_error(error, deadline)) from None

    def status(self, response: httpx.Response) -> int:
        return response.status_code

    def fault(self, response: httpx.Response) -> str:
        return fault_of(response.request, f"http_{response.status_code}")

    async def renew(self, rejected: str) -> str | None:
        refresh = self.client.post(REFRESH_PATH, json={"refresh_token": rejected})
        try:
            response = await self.deadlines.run(self.gateway.policy.deadline_seconds, refresh)
        except (httpx.HTTPError, TimeoutError):
            return None
        if response.status_code != 200:
            return None
        try:
            new_token = response_json(response)["access_token"]
        except (ValueError, KeyError, TypeError):
            return None
        return new_token if isinstance(new_token, str) else None

    def refresh_failure(self) -> str:
        return "failed"

    def replayable(self) -> bool:
        return True

    def release(self, response: httpx.Response) -> None:
        """Read whole already."""


def _relayed(response: httpx.Response) -> GatewayResponse:
    """The platform's answer as the agent gets it: its status and JSON body (a body that is
    not a JSON object is wrapped)."""
    try:
        body = response_json(response)
    except ValueError:
        body = {"body": response.text}
    if not isinstance(body, dict):
        body = {"data": body}
    return GatewayResponse(response.status_code, body)


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

    `path` (with its query) goes where the HTTP gateway sends an agent's path
    (`calls.urls.upstream_url`): appended to the platform's `base_url` path, never changing
    its scheme, host or port (`//evil`, `@evil` and `http://evil/` are path text), dot
    segments resolved inside the caller's part, so `..` cannot climb out of `base_url`.
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
    rest, _, query = relative.raw_path.partition(b"?")
    url = upstream_url(Base.parse(str(base)), rest, query)  # the HTTP gateway's rule
    return _Request(method, httpx.URL(url), content)


def _refusal_response(refusal: Refusal) -> GatewayResponse:
    if refusal.cls is OutcomeClass.PENDING_APPROVAL:
        return GatewayResponse(202, {"status": "pending_approval", "message": refusal.reason})
    if refusal.cls is OutcomeClass.PERMISSION_DENIED:
        return GatewayResponse(403, {"error": "permission_denied", "message": refusal.reason})
    if refusal.cls is OutcomeClass.CALLER_ERROR:
        return GatewayResponse(400, {"error": "invalid_request", "message": refusal.reason})
    return GatewayResponse(401, {"error": "request_refused", "message": refusal.reason})
