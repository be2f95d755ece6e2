"""What a finished call was, as the breaker sees it: a class, and whether that class counts.

Classification (`engine.classify`) is the only place that builds `Outcome`s from the wire; the
breaker core trusts the class and checks `counted` against its policy.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from enum import StrEnum


class OutcomeClass(StrEnum):
    SUCCESS = "success"
    AUTH_FAILURE = "auth_failure"
    UPSTREAM_FAILURE = "upstream_failure"
    MALFORMED_OUTPUT = "malformed_output"
    RATE_LIMITED = "rate_limited"
    CALLER_ERROR = "caller_error"
    PERMISSION_DENIED = "permission_denied"
    REFUSED_PRE_CALL = "refused_pre_call"
    PENDING_APPROVAL = "pending_approval"
    UPSTREAM_ERROR = "upstream_error"
    CREDENTIAL_REVOKED = "credential_revoked"
    #: Under `agent`: a relayed 1xx-3xx, neither a success nor a failure (no `call.failed`).
    PLATFORM_ANSWER = "platform_answer"
    #: The gateway's own condition (no connection free within its bound, the drain's end):
    #: never the platform's, never counted.
    GATEWAY_BUSY = "gateway_busy"


@dataclass(frozen=True, slots=True)
class Outcome:
    cls: OutcomeClass
    counted: bool = False
    retry_after: float | None = None
    detail: str = ""
    #: The caller went away mid-call (`ABANDONED`): the breaker judges it as the probe's
    #: (`Breaker.judge`), so every door hands it over alike.
    abandoned: bool = False

    @property
    def is_success(self) -> bool:
        return self.cls is OutcomeClass.SUCCESS


SUCCESS = Outcome(OutcomeClass.SUCCESS)


#: What a caller abandons a call with: its task cancelled from outside, or one of these raised
#: through the guarded body. Never the call's outcome, never the backend's doing.
ABANDONING: tuple[type[BaseException], ...] = (
    asyncio.CancelledError,
    KeyboardInterrupt,
    SystemExit,
    GeneratorExit,
)

#: A call its caller abandoned: a neutral completion (DESIGN, "Both policies"), written as an
#: MCP host's cancellation always was: an uncounted `caller_error`, which frees a probe slot.
ABANDONED = Outcome(
    OutcomeClass.CALLER_ERROR, detail="the caller abandoned the call", abandoned=True
)

#: The third probe in a row of one open episode abandoned with its request on the wire: the
#: platform held it longer than the caller would wait, so it counts as a timeout.
ABANDONED_TIMEOUT = Outcome(
    OutcomeClass.UPSTREAM_FAILURE,
    counted=True,
    detail="no answer before its caller gave up, three probes in a row: read as a timeout",
)


def recorded_as(outcome: Outcome, counted: bool) -> Outcome:
    """The outcome a call was recorded as, from whether its line counted: the one it was
    completed with, unless the breaker judged an abandoned probe the third in a row."""
    return ABANDONED_TIMEOUT if outcome.abandoned and counted else outcome
