"""The `agent` policy's exchange with a platform, written once for every gateway (DESIGN,
"`agent` policy" and "`breakerdeck gateway`"): the credential, a connection, the request, and
on a status read as a rejected credential one refresh and one resend; then what the call was
(its outcome), what the wire did on the last attempt (`fault`), the platform's status and the
agent's.

The steps and their rules live here and nowhere else; the I/O is a `Transport`'s: httpx for the
in-process `Gateway` (the simulation, the headless trace, the console), aiohttp for the ASGI
gateway. So what the scenarios prove is what a production gateway runs.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol, TypeVar

from breakerdeck.engine import results
from breakerdeck.engine.calls.callpath import Completion, OneAttempt
from breakerdeck.engine.core.classify import agent_outcome_for_response
from breakerdeck.engine.engine import Call
from breakerdeck.engine.errors import VaultUnavailable
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.results import GatewayResponse

R = TypeVar("R")

#: What a platform's answer to an unreplayable body is, after a refresh (DESIGN: relayed,
#: uncounted).
NOT_REPLAYED = Outcome(OutcomeClass.UPSTREAM_ERROR, detail="not replayed: body too big")


class Unsent(Exception):
    """A request that got no response: what the wire did (the trace's `fault`) and the 502's
    words for it."""

    def __init__(self, fault: str, detail: str) -> None:
        super().__init__(detail)
        self.fault = fault
        self.detail = detail


class Failed(Exception):
    """The gateway answers for the platform: the call could not be completed (counted), the
    credential was rejected after the refresh (counted), or no connection was free (never
    counted). `answer` is the agent's, from `results`."""

    def __init__(
        self, outcome: Outcome, answer: GatewayResponse, retry_after: int | None = None
    ) -> None:
        super().__init__(outcome.detail)
        self.outcome = outcome
        self.answer = answer
        self.retry_after = retry_after


class Transport(Protocol[R]):
    """One call's I/O with one platform. `R` is the transport's response."""

    platform: str
    #: The statuses read as a rejected credential (DESIGN: `auth_failure_statuses`).
    auth_statuses: frozenset[int]

    def held(self) -> str | None:
        """The agent's credential already in hand, if any (no coroutine: most calls)."""

    async def fetch(self) -> str:
        """The agent's stored credential, read from its source, or `VaultUnavailable`."""

    def connect(self) -> Awaitable[None] | None:
        """Whatever the request needs before it is sent (a connection slot): None when it is
        had at once (no coroutine: most calls never wait), else what to wait on, which may
        raise `Failed`."""

    async def send(self, credential: str, attempt: int) -> R:
        """Attempt number `attempt` (1, or 2 after a refresh), or `Unsent`."""

    def status(self, response: R) -> int: ...

    def fault(self, response: R) -> str:
        """What the wire did for this response: `http_<status>` unless the wire says more."""

    async def renew(self, rejected: str) -> str | None:
        """A new credential (None when the refresh failed)."""

    def refresh_failure(self) -> str:
        """What the agent's 401 and the call's detail say about a refresh that failed."""

    def replayable(self) -> bool:
        """Whether the request's body can be sent a second time."""

    def release(self, response: R) -> None:
        """Done with a response that is not relayed."""


class Exchange(OneAttempt):
    """One gateway call's record and its one attempt (the refresh-and-resend happens inside
    it): what the call's line and the agent's answer need. A shell subclasses it with its own
    answer."""

    __slots__ = ("agent_status", "call", "fault", "outcome", "platform_status", "refresh")

    def __init__(self, call: Call) -> None:
        self.call = call
        self.fault = "none"
        self.platform_status: int | None = None
        self.refresh: str | None = None
        self.outcome: Outcome | None = None
        self.agent_status = 0

    def completion(self) -> Completion:
        outcome = self.outcome
        assert outcome is not None
        return outcome, self.fault, self.agent_status, self.refresh, self.platform_status

    def decide(self, outcome: Outcome, agent_status: int) -> None:
        self.outcome = outcome
        self.agent_status = agent_status

    async def run(self, transport: Transport[R]) -> R:
        """The platform's answer to relay (the outcome decided at its head), or `Failed`; on
        either, the outcome and the agent's status are decided. Written as one coroutine
        (the attempts a loop): aiohttp's request resumes every frame above it at each step."""
        platform = transport.platform
        try:
            credential = transport.held() or await transport.fetch()
        except VaultUnavailable:
            # The reason (a file's path, a command's name) is the operator's: logged where
            # it is raised, never in the agent's answer.
            self.fault = "vault_down"
            detail = f"the credential vault is unreachable for {platform}"
            raise self._failed(upstream(platform, detail)) from None
        waiting = transport.connect()
        if waiting is not None:
            try:
                await waiting
            except Failed as failed:
                raise self._failed(failed) from None
        for attempt in (1, 2):
            self.call.attempts += 1
            try:
                response = await transport.send(credential, attempt)
            except Unsent as unsent:
                self.fault, self.platform_status = unsent.fault, None
                raise self._failed(upstream(platform, unsent.detail)) from None
            status = transport.status(response)
            self.fault, self.platform_status = transport.fault(response), status
            if status not in transport.auth_statuses:
                break
            if attempt == 2:
                transport.release(response)
                rejected = "succeeded but the new token was rejected too"
                raise self._failed(auth_failed(platform, rejected))
            renewed = await transport.renew(credential)
            if renewed == credential:
                renewed = None  # DESIGN: a refresh that yields the same value is a failed one
            self.refresh = "failed" if renewed is None else "ok"
            if renewed is None:
                transport.release(response)
                raise self._failed(auth_failed(platform, transport.refresh_failure()))
            if not transport.replayable():
                self.decide(NOT_REPLAYED, status)
                return response
            transport.release(response)
            credential = renewed
        self.decide(agent_outcome_for_response(status), status)
        return response

    def _failed(self, failed: Failed) -> Failed:
        self.decide(failed.outcome, failed.answer.status)
        return failed


def upstream(platform: str, detail: str) -> Failed:
    """The call could not be completed (vault, network, deadline): counted, a 502."""
    outcome = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail=detail)
    return Failed(outcome, results.upstream_failure(platform, detail))


def auth_failed(platform: str, refresh: str) -> Failed:
    """The credential rejected even after `refresh`: counted, a 401 `reauth_failed`."""
    detail = f"{platform} rejected the credential; refresh {refresh}"
    outcome = Outcome(OutcomeClass.AUTH_FAILURE, counted=True, detail=detail)
    return Failed(outcome, results.reauth_failed(platform, refresh))


def busy(limit: str) -> Failed:
    """No connection slot within the wait: the gateway's own condition, never counted."""
    detail = f"the gateway has no free connection to the platform ({limit})"
    outcome = Outcome(OutcomeClass.GATEWAY_BUSY, detail=detail)
    return Failed(outcome, results.gateway_busy(limit), retry_after=results.BUSY_RETRY_SECONDS)
