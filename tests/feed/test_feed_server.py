"""The feed server over real loopback sockets: snapshot, ordered events, auth, requests, faults."""

from __future__ import annotations

import asyncio
import json

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus

from breakerdeck.engine.engine import Engine
from breakerdeck.engine.events import RESET, record
from breakerdeck.engine.feed import protocol as p
from breakerdeck.engine.feed.server import serve_feed
from tests.feed.feedkit import (
    OPERATOR,
    VIEWER,
    call,
    client,
    events_until,
    receive,
    request,
    trip,
)


async def test_snapshot_on_connect(engine: Engine, feed) -> None:
    trip(engine, "agent-1")
    call(engine, "agent-2")
    async with client(feed.url) as ws:
        snap = await receive(ws)
    assert isinstance(snap, p.SnapshotMessage)
    assert snap.version == 1
    assert snap.seq == engine.seq
    assert snap.source == "test-engine"
    assert snap.policy == "agent"
    assert snap.thresholds == {"auth_failure": 3, "upstream_failure": 5}
    by_key = {b.key: b for b in snap.breakers}
    opened = by_key["agent-1"]
    assert (opened.state, opened.count, opened.agent) == ("open", 3, "agent-1")
    assert opened.trip_cause == "auth_failure"
    assert opened.retry_after_seconds == pytest.approx(300.0)
    assert opened.source == "test-engine"
    assert by_key["agent-2"].state == "closed"
    assert by_key["agent-2"].retry_after_seconds is None


async def test_events_arrive_in_order_with_the_trace_fields(engine: Engine, feed) -> None:
    written = []
    engine.subscribe(lambda event: written.append(record(event, engine.epoch)))
    async with client(feed.url) as ws:
        snap = await receive(ws)
        call(engine, "agent-1")
        await asyncio.sleep(0.01)
        trip(engine, "agent-1")
        got = await events_until(ws, engine.seq)
    assert [e.seq for e in got] == list(range(snap.seq + 1, engine.seq + 1))
    assert [e.model_dump(exclude={"view"}) for e in got] == written
    assert got[-1].type == "circuit_breaker.tripped"
    assert got[-1].fields["cause_seq"] == got[-2].seq


async def test_events_that_change_a_breaker_carry_its_view_as_of_that_event(
    engine: Engine, feed
) -> None:
    async with client(feed.url) as ws:
        snap = await receive(ws)
        call(engine, "agent-1")  # the key's first line
        call(engine, "agent-1")  # a success that changes nothing: no view
        trip(engine, "agent-1")
        got = await events_until(ws, engine.seq)
    assert snap.revision == p.PROTOCOL_REVISION >= 2
    views = [(e.type, e.view and (e.view.state, e.view.count)) for e in got]
    assert views == [
        ("call.completed", ("closed", 0)),
        ("call.completed", None),
        ("call.completed", ("closed", 1)),
        ("call.completed", ("closed", 2)),
        ("call.completed", None),  # the third failure's view is on the trip it caused
        ("circuit_breaker.tripped", ("open", 3)),
    ]
    tripped = got[-1].view
    assert tripped is not None
    assert tripped.trip_cause == "auth_failure"
    assert tripped.retry_after_seconds == pytest.approx(300.0)
    assert tripped.reopens_at is not None


async def test_with_nobody_connected_healthy_calls_write_no_line(engine: Engine, feed) -> None:
    written = engine.seq
    call(engine, "agent-1")
    async with client(feed.url) as ws:
        await receive(ws)
    async with asyncio.timeout(10):
        while feed.client_count:  # the server sees the close after the client does
            await asyncio.sleep(0.01)
    call(engine, "agent-1")
    assert engine.seq == written


async def test_the_first_event_on_a_key_carries_its_view(engine: Engine, feed) -> None:
    async with client(feed.url) as ws:
        await receive(ws)
        call(engine, "newcomer")
        got = await events_until(ws, engine.seq)
    assert [e.view.key if e.view else None for e in got] == ["newcomer"]


async def test_a_burst_is_batched_into_one_frame_with_the_same_bytes_for_everyone(
    engine: Engine, feed
) -> None:
    async with client(feed.url) as one, client(feed.url, OPERATOR) as two:
        await receive(one)
        await receive(two)
        for _ in range(50):
            call(engine, "agent-1")
        raw_one = await asyncio.wait_for(one.recv(), 5)
        raw_two = await asyncio.wait_for(two.recv(), 5)
    assert raw_one == raw_two
    batch = p.parse_server_message(raw_one)
    assert isinstance(batch, p.EventsMessage)
    assert len(batch.events) == 50
    assert batch.seq == engine.seq


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": f"Basic {VIEWER}"},
        {"Authorization": "Bearer "},
        {"Authorization": f"Bearer {VIEWER}x"},
    ],
    ids=["missing", "wrong", "not-bearer", "empty", "prefix-of-real"],
)
async def test_a_bad_or_missing_token_is_refused_at_the_handshake(feed, headers) -> None:
    from websockets.asyncio.client import connect

    with pytest.raises(InvalidStatus) as refused:
        async with connect(feed.url, additional_headers=headers):
            pass
    assert refused.value.response.status_code == 401
    assert b"Bearer" in refused.value.response.body
    assert feed.client_count == 0


async def test_a_viewer_cannot_reset_and_nothing_changes(engine: Engine, feed) -> None:
    trip(engine, "agent-1")
    seq = engine.seq
    async with client(feed.url, VIEWER) as ws:
        await receive(ws)
        answer = await request(ws, type="reset", key="agent-1", request_id="r1", reason="x")
        fixed = await request(ws, type="mark_fixed", key="agent-1", request_id=7)
    assert isinstance(answer, p.ErrorMessage)
    assert (answer.code, answer.request_id) == ("forbidden", "r1")
    assert "operator token" in answer.message
    assert (fixed.code, fixed.request_id) == ("forbidden", 7)
    assert engine.view("agent-1").state == "open"
    assert engine.seq == seq
    assert engine.audit.query(types=RESET) == []


async def test_an_operator_reset_is_acked_closes_and_is_audited(engine: Engine, feed) -> None:
    trip(engine, "agent-1")
    async with client(feed.url, OPERATOR) as ws:
        await receive(ws)
        await ws.send(
            json.dumps(
                {
                    "type": "reset",
                    "key": "agent-1",
                    "request_id": "abc",
                    "reason": "vault fixed",
                    "actor": "alice",
                }
            )
        )
        answer = await receive(ws)
        assert isinstance(answer, p.AckMessage)
        assert answer.request_id == "abc"
        reset_event = (await events_until(ws, answer.seq))[-1]
    assert engine.view("agent-1").state == "closed"
    assert engine.view("agent-1").count == 0
    assert reset_event.type == RESET
    assert reset_event.fields["actor"] == "remote:operator:alice"
    [audited] = engine.audit.query(types=RESET)
    assert audited.seq == answer.seq
    assert audited.fields["actor"] == "remote:operator:alice"
    assert audited.fields["reason"] == "vault fixed"


async def test_resetting_a_closed_breaker_is_acked_and_audited(engine: Engine, feed) -> None:
    call(engine, "agent-2")
    async with client(feed.url, OPERATOR) as ws:
        await receive(ws)
        answer = await request(ws, type="reset", key="agent-2", request_id="r", version=1)
    assert isinstance(answer, p.AckMessage)
    [audited] = engine.audit.query(types=RESET)
    assert audited.key == "agent-2"
    assert audited.fields["actor"] == "remote:operator"
    assert audited.fields["reason"] == "reset over the live feed"


async def test_mark_fixed_needs_the_operator_and_writes_credential_restored(
    engine: Engine, feed
) -> None:
    call(engine, "agent-1")
    async with client(feed.url, OPERATOR) as ws:
        await receive(ws)
        answer = await request(ws, type="mark_fixed", key="agent-1", request_id="m1")
    assert isinstance(answer, p.AckMessage)
    [restored] = engine.audit.query(types="credential.restored")
    assert restored.fields["actor"] == "remote:operator"


async def test_an_unknown_key_is_an_error_naming_it(engine: Engine, feed) -> None:
    call(engine, "agent-1")
    seq = engine.seq
    async with client(feed.url, OPERATOR) as ws:
        await receive(ws)
        answer = await request(ws, type="reset", key="nobody", request_id="u1")
    assert isinstance(answer, p.ErrorMessage)
    assert answer.code == "unknown_key"
    assert "'nobody'" in answer.message
    assert engine.seq == seq


@pytest.mark.parametrize(
    ("frame", "code", "request_id"),
    [
        ("{not json", "bad_json", None),
        ("[1, 2]", "bad_json", None),
        ('"reset"', "bad_json", None),
        ('{"type": "explode", "request_id": "q"}', "unknown_type", "q"),
        ('{"key": "agent-1", "request_id": "q"}', "unknown_type", "q"),
        ('{"type": "reset", "key": "agent-1", "request_id": "q", "version": 2}', "unsupported_version", "q"),  # noqa: E501
        ('{"type": "reset", "key": "agent-1", "request_id": "q", "version": "1"}', "unsupported_version", "q"),  # noqa: E501
        ('{"type": "reset", "key": "agent-1", "request_id": 1, "version": true}', "unsupported_version", 1),  # noqa: E501
        ('{"type": "reset", "request_id": "q"}', "invalid_message", "q"),
        ('{"type": "reset", "key": "agent-1"}', "invalid_message", None),
        ('{"type": "reset", "key": "agent-1", "request_id": "q", "resaon": "typo"}', "invalid_message", "q"),  # noqa: E501
        ('{"type": "reset", "key": 5, "request_id": "q"}', "invalid_message", "q"),
    ],
)  # fmt: skip
async def test_bad_messages_get_a_clear_error_and_change_nothing(
    engine: Engine, feed, frame: str, code: str, request_id
) -> None:
    trip(engine, "agent-1")
    seq = engine.seq
    async with client(feed.url, OPERATOR) as ws:
        await receive(ws)
        await ws.send(frame)
        answer = await receive(ws)
        assert isinstance(answer, p.ErrorMessage), answer
        assert (answer.code, answer.request_id) == (code, request_id)
        assert answer.message
        assert engine.seq == seq
        # The same connection keeps working.
        ok = await request(ws, type="reset", key="agent-1", request_id="after")
        assert isinstance(ok, p.AckMessage)


async def request_raw_answer(ws):
    while True:
        message = await receive(ws)
        if isinstance(message, p.AckMessage | p.ErrorMessage):
            return message


async def test_binary_frames_are_read_as_json_text(engine: Engine, feed) -> None:
    call(engine, "agent-1")
    async with client(feed.url, OPERATOR) as ws:
        await receive(ws)
        await ws.send(b'{"type": "reset", "key": "agent-1", "request_id": "b"}')
        answer = await receive(ws)
        await ws.send(b"\xff\xfe")
        broken = await request_raw_answer(ws)
    assert isinstance(answer, p.AckMessage)
    assert broken.code == "bad_json"


async def test_a_huge_message_closes_that_connection_and_others_are_served(
    engine: Engine, feed
) -> None:
    async with client(feed.url, OPERATOR) as bystander:
        await receive(bystander)
        async with client(feed.url, OPERATOR) as ws:
            await receive(ws)
            await ws.send(json.dumps({"type": "reset", "key": "x" * 100_000, "request_id": "h"}))
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 5)
        assert closed.value.rcvd.code == 1009
        call(engine, "agent-1")
        [event] = await events_until(bystander, engine.seq)
        assert event.type == "call.completed"
    async with client(feed.url) as newcomer:
        assert isinstance(await receive(newcomer), p.SnapshotMessage)


async def test_the_tokens_must_be_present_and_differ(engine: Engine) -> None:
    with pytest.raises(ValueError, match="non-empty"):
        async with serve_feed(engine, port=0, viewer_token="", operator_token="x"):
            pass
    with pytest.raises(ValueError, match="differ"):
        async with serve_feed(engine, port=0, viewer_token="same", operator_token="same"):
            pass


async def test_the_snapshot_names_the_token_role(feed) -> None:
    async with client(feed.url, VIEWER) as ws:
        viewer = await receive(ws)
    async with client(feed.url, OPERATOR) as ws:
        operator = await receive(ws)
    assert (viewer.role, operator.role) == ("viewer", "operator")
    # an older server's snapshot (no role) still parses
    old = viewer.model_dump(exclude={"role"})
    assert p.parse_server_message(json.dumps(old)).role is None
