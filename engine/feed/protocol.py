"""The live feed's wire protocol: versioned JSON messages, each a pydantic model.

Every message is one JSON object in one websocket text frame, with a `type`. docs/feed.md is
the reference; this module is the executable form both ends validate against.

Server to client: `snapshot`, `event`, `events` (a batch), `ack`, `error`.
Client to server: `reset`, `mark_fixed`, `hold`, `release`, `mode`.

Versioning: the snapshot carries `version` (this module speaks 1) and `revision` (2: events that
change a breaker carry its `view`; 3: the snapshot says the shared store's health, and a change
of it resyncs every client with a snapshot; absent means 1). A client message may omit
`version` (meaning 1); a present version other than 1 is refused with `unsupported_version`.
Additive changes (new fields in server messages) keep the version; clients ignore fields they
do not know. Client messages are strict: an unknown field is an error, so a typo never passes
silently.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from breakerdeck.engine.core import holds
from breakerdeck.engine.state import State

PROTOCOL_VERSION: Literal[1] = 1
Role = Literal["viewer", "operator"]
#: Additive revisions within version 1. 2: an event that changes its breaker carries `view`.
#: 3: the snapshot carries `shared_store` and `shared_store_reason`. 4: a breaker carries
#: `probe_since` (half-open with its probe out). 5: a breaker carries `mode` and, while held,
#: `held_by`, `held_reason` and `held_until`; clients may send `hold`, `release` and `mode`.
PROTOCOL_REVISION = 5
#: A replica's shared store (DESIGN, "Replicas"): answering, or lost (it decides alone).
SharedStoreHealth = Literal["ok", "lost"]

#: Error codes, as sent in `error.code`.
BAD_JSON = "bad_json"  # the frame is not a JSON object
UNKNOWN_TYPE = "unknown_type"  # `type` missing or not one this server knows
UNSUPPORTED_VERSION = "unsupported_version"  # `version` present and not 1
INVALID = "invalid_message"  # right type, wrong fields
FORBIDDEN = "forbidden"  # a viewer token asked for an operator write
UNKNOWN_KEY = "unknown_key"  # no breaker with that key on this engine
NOT_HELD = "not_held"  # a release of a breaker no one holds
INTERNAL = "internal"  # the engine failed; nothing was changed by the feed

RequestId = StrictStr | StrictInt

#: Bounds on what an operator's request may carry (characters). Every console shows the actor
#: and reason, and the audit log keeps them: long enough for a name and a sentence or two.
MAX_KEY_CHARS = 1024
MAX_ACTOR_CHARS = 200
MAX_REASON_CHARS = 500


class ProtocolError(Exception):
    """A message that cannot be accepted; `code` and `message` go into an `error` frame."""

    def __init__(self, code: str, message: str, request_id: str | int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id


# -- server to client -----------------------------------------------------------------------


class _ServerMessage(BaseModel):
    # A newer server may add fields without a version bump; an older client ignores them.
    model_config = ConfigDict(extra="ignore", frozen=True)


class BreakerInfo(_ServerMessage):
    """One breaker in a snapshot. Times are ISO-8601 UTC on the engine's clock."""

    key: str
    agent: str | None
    agents: list[str] = Field(default_factory=list)
    shared: bool = False
    state: State
    count: int
    retry_after_seconds: float | None
    source: str
    trip_cause: str | None = None
    paged: bool = False
    paused: bool = False
    opened_at: str | None = None
    reopens_at: str | None = None
    cooldown_seconds: float = 0.0
    failed_probes: int = 0
    last_failure_at: str | None = None
    #: Revision 4: half-open with its probe out, since when; null when no probe is out.
    probe_since: str | None = None
    #: Revision 5: `enforce` or `shadow`; while held, who holds it, why, and until when.
    mode: str = "enforce"
    held_by: str | None = None
    held_reason: str | None = None
    held_until: str | None = None

    @property
    def display_state(self) -> str:
        """CLOSED, OPEN, HALF-OPEN, HELD, or PAUSED for a revoked credential (which wins)."""
        if self.paused:
            return "PAUSED"
        return self.state.upper().replace("_", "-")


class EventRecord(BaseModel):
    """An event with the headless trace's fields (engine.events.record); per-type fields ride
    along as extra keys. `view` (revision 2) is the key's breaker as of this event, on the
    events that change it; it is the feed's, never a trace line's."""

    model_config = ConfigDict(extra="allow", frozen=True)

    seq: int
    t: float
    at: str
    type: str
    key: str
    agent: str | None
    view: BreakerInfo | None = None

    @property
    def fields(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class SnapshotMessage(_ServerMessage):
    type: Literal["snapshot"] = "snapshot"
    version: int = PROTOCOL_VERSION
    #: Absent (read as 1) from a server that predates revisions: its events carry no views.
    revision: int = 1
    seq: int
    source: str
    policy: str
    at: str
    epoch: str
    thresholds: dict[str, int] = Field(default_factory=dict)
    breakers: list[BreakerInfo]
    #: The role of the token this connection presented: "viewer" or "operator" (None from a
    #: server that predates the field). A console offers resets only to an operator.
    role: Role | None = None
    #: Revision 3: the engine's shared store, "ok" or "lost"; None when it has none (or the
    #: server predates the field). While lost the replica decides alone, and
    #: `shared_store_reason` says why; with "ok" it says what is wrong all the same (this
    #: replica's clock is off the store's, naming the offset), or is None. A change of
    #: health or reason resyncs every client with a snapshot, a message every client of
    #: version 1 already applies.
    shared_store: SharedStoreHealth | None = None
    shared_store_reason: str | None = None


class EventMessage(_ServerMessage):
    type: Literal["event"] = "event"
    seq: int
    event: EventRecord

    @model_validator(mode="after")
    def _same_seq(self) -> EventMessage:
        if self.event.seq != self.seq:
            raise ValueError(f"frame seq {self.seq} differs from its event's seq {self.event.seq}")
        return self


class EventsMessage(_ServerMessage):
    type: Literal["events"] = "events"
    seq: int  # the last event's seq
    events: list[EventRecord] = Field(min_length=1)

    @model_validator(mode="after")
    def _ordered(self) -> EventsMessage:
        seqs = [event.seq for event in self.events]
        if any(b <= a for a, b in itertools.pairwise(seqs)):
            raise ValueError("events in a batch must have strictly increasing seqs")
        if seqs[-1] != self.seq:
            raise ValueError(f"batch seq {self.seq} differs from its last event's {seqs[-1]}")
        return self


class AckMessage(_ServerMessage):
    type: Literal["ack"] = "ack"
    request_id: RequestId
    seq: int | None = None  # the seq of the event the request wrote


class ErrorMessage(_ServerMessage):
    type: Literal["error"] = "error"
    request_id: RequestId | None
    code: str
    message: str


ServerMessage = Annotated[
    SnapshotMessage | EventMessage | EventsMessage | AckMessage | ErrorMessage,
    Field(discriminator="type"),
]
_SERVER = TypeAdapter(ServerMessage)
_SERVER_TYPES = frozenset({"snapshot", "event", "events", "ack", "error"})


# -- client to server -----------------------------------------------------------------------


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    key: StrictStr = Field(min_length=1, max_length=MAX_KEY_CHARS)
    request_id: RequestId
    reason: StrictStr = Field(default="", max_length=MAX_REASON_CHARS)
    version: Literal[1] = PROTOCOL_VERSION
    #: Who is asking, as the operator typed it (unverified: the token is what is checked).
    actor: StrictStr | None = Field(default=None, min_length=1, max_length=MAX_ACTOR_CHARS)


class ResetRequest(_Request):
    type: Literal["reset"] = "reset"


class MarkFixedRequest(_Request):
    type: Literal["mark_fixed"] = "mark_fixed"


class _Reasoned(_Request):
    """A write whose reason is required: the audit log says why a breaker was steered."""

    reason: StrictStr = Field(min_length=1, max_length=MAX_REASON_CHARS)

    @model_validator(mode="after")
    def _said(self) -> Self:
        if not self.reason.strip():
            raise ValueError("reason: a reason is required, and blank is none")
        return self


class HoldRequest(_Reasoned):
    """Hold open for `duration` (`90s`, `30m`, `2h`) or `seconds`: exactly one of them, at
    most the engine's `max_hold_seconds` (checked by the server, which knows it)."""

    type: Literal["hold"] = "hold"
    duration: StrictStr | None = Field(default=None, max_length=16)
    seconds: StrictInt | StrictFloat | None = Field(default=None, gt=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _one_length(self) -> Self:
        if (self.duration is None) == (self.seconds is None):
            raise ValueError("give the hold's length as one of duration (30m) or seconds")
        if self.duration is not None:
            holds.duration_seconds(self.duration, math.inf)
        return self

    def seconds_within(self, most: float) -> float:
        """The hold's length in seconds, at most `most` (else `ValueError`, which says so)."""
        if self.duration is not None:
            return holds.duration_seconds(self.duration, most)
        assert self.seconds is not None
        if self.seconds > most:
            raise ValueError(
                f"a hold lasts at most {most:g} s (max_hold_seconds), not {self.seconds:g}"
            )
        return float(self.seconds)


class ReleaseRequest(_Request):
    """End a hold: half-open, or closed with `close`."""

    type: Literal["release"] = "release"
    close: StrictBool = False


class ModeRequest(_Reasoned):
    type: Literal["mode"] = "mode"
    mode: Literal["enforce", "shadow"]


ClientRequest = ResetRequest | MarkFixedRequest | HoldRequest | ReleaseRequest | ModeRequest
ClientMessage = Annotated[ClientRequest, Field(discriminator="type")]
_CLIENT = TypeAdapter(ClientMessage)
_CLIENT_TYPES = frozenset({"reset", "mark_fixed", "hold", "release", "mode"})


# -- decoding -------------------------------------------------------------------------------


def _load_object(raw: str | bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ProtocolError(BAD_JSON, f"not valid JSON: {error}") from None
    except RecursionError:
        # The stdlib parser recurses once per level; no message of this protocol nests deeply.
        raise ProtocolError(
            BAD_JSON, "JSON nested too deeply to read; this protocol's messages are flat objects"
        ) from None
    if not isinstance(value, dict):
        raise ProtocolError(BAD_JSON, f"expected a JSON object, got {type(value).__name__}")
    return value


def _request_id(value: Mapping[str, Any]) -> str | int | None:
    rid = value.get("request_id")
    return rid if isinstance(rid, str | int) and not isinstance(rid, bool) else None


def _check_version(value: Mapping[str, Any], request_id: str | int | None) -> None:
    if "version" not in value:
        return
    version = value["version"]
    if type(version) is not int or version != PROTOCOL_VERSION:
        raise ProtocolError(
            UNSUPPORTED_VERSION,
            f"protocol version {version!r} is not supported; this end speaks {PROTOCOL_VERSION}",
            request_id,
        )


def _explain(error: ValidationError) -> str:
    parts = []
    for item in error.errors(include_url=False):
        where = ".".join(str(p) for p in item["loc"][1:]) or "message"
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)


def parse_client_message(raw: str | bytes) -> ClientRequest:
    """A client's frame, validated; raises `ProtocolError` with the code to answer with."""
    value = _load_object(raw)
    request_id = _request_id(value)
    kind = value.get("type")
    if kind not in _CLIENT_TYPES:
        known = ", ".join(sorted(_CLIENT_TYPES))
        raise ProtocolError(
            UNKNOWN_TYPE, f"unknown message type {kind!r}; a client may send: {known}", request_id
        )
    _check_version(value, request_id)
    try:
        return _CLIENT.validate_python(value)
    except ValidationError as error:
        message = f"invalid {kind} message: {_explain(error)}"
        raise ProtocolError(INVALID, message, request_id) from None


def parse_server_message(
    raw: str | bytes,
) -> SnapshotMessage | EventMessage | EventsMessage | AckMessage | ErrorMessage:
    """A server's frame, validated; raises `ProtocolError` when it is not this protocol."""
    value = _load_object(raw)
    kind = value.get("type")
    if kind not in _SERVER_TYPES:
        raise ProtocolError(UNKNOWN_TYPE, f"unknown server message type {kind!r}")
    if kind == "snapshot":
        version = value.get("version")
        if type(version) is not int or version != PROTOCOL_VERSION:
            raise ProtocolError(
                UNSUPPORTED_VERSION,
                f"the server speaks protocol version {version!r}; "
                f"this client speaks {PROTOCOL_VERSION}",
            )
    try:
        return _SERVER.validate_python(value)
    except ValidationError as error:
        raise ProtocolError(INVALID, f"invalid {kind} message: {_explain(error)}") from None


# -- encoding (the server side) -------------------------------------------------------------


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()


def encode_events(records: Iterable[Mapping[str, Any]]) -> bytes:
    """One frame for events already in record form: `event` for one, `events` for several.

    Built with the stdlib encoder from dicts the engine already made (the hot path); the
    shape is the models' above, which the tests and every client check.
    """
    batch = list(records)
    if len(batch) == 1:
        return _dumps({"type": "event", "seq": batch[0]["seq"], "event": batch[0]})
    return _dumps({"type": "events", "seq": batch[-1]["seq"], "events": batch})


def encode(message: BaseModel) -> bytes:
    return message.model_dump_json().encode()


def error_frame(code: str, message: str, request_id: str | int | None = None) -> bytes:
    return encode(ErrorMessage(request_id=request_id, code=code, message=message))
