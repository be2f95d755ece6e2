"""The feed's `hold`, `release` and `mode` (DESIGN, "Operator control: hold and shadow"): the
operator token only, errors as `reset` gives them, audited with the actor, and nothing changed
by a refusal (the engine's seq and view are the witnesses)."""

from __future__ import annotations

import pytest

from breakerdeck.engine import events as ev
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.feed import protocol as p
from tests.feed.feedkit import OPERATOR, VIEWER, call, client, events_until, receive, request

HOLD = {"type": "hold", "key": "agent-1", "reason": "vendor maintenance", "duration": "30m"}


async def ask(url: str, token: str = OPERATOR, **fields):
    async with client(url, token) as ws:
        snapshot = await receive(ws)
        assert isinstance(snapshot, p.SnapshotMessage)
        return await request(ws, request_id="r1", **fields)


async def test_an_operator_hold_is_acked_audited_with_its_actor_and_shown_in_the_snapshot(
    engine: Engine, feed
) -> None:
    call(engine, "agent-1")
    async with client(feed.url, OPERATOR) as ws:
        await receive(ws)
        answer = await request(ws, request_id="h1", actor="alice", **HOLD)
        assert isinstance(answer, p.AckMessage)
        held = (await events_until(ws, answer.seq))[-1]
    assert held.type == ev.HELD
    assert held.fields["actor"] == "remote:operator:alice"
    assert held.view is not None and held.view.state == "held"
    assert held.view.held_by == "remote:operator:alice"
    [audited] = engine.audit.query(types=ev.HELD)
    assert audited.fields["actor"] == "remote:operator:alice"
    assert audited.fields["reason"] == "vendor maintenance"
    view = engine.view("agent-1")
    assert view.state == "held"
    assert view.held_until == pytest.approx(engine.clock.wall() + 1800)
    async with client(feed.url, VIEWER) as ws:
        snapshot = await receive(ws)
    [breaker] = snapshot.breakers
    assert (breaker.state, breaker.display_state) == ("held", "HELD")
    assert (breaker.held_by, breaker.held_reason) == ("remote:operator:alice", "vendor maintenance")
    assert breaker.held_until is not None and breaker.mode == "enforce"
    assert snapshot.revision == 5


async def test_a_hold_in_seconds_is_the_same_hold(engine: Engine, feed) -> None:
    call(engine, "agent-1")
    fields = {k: v for k, v in HOLD.items() if k != "duration"}
    assert isinstance(await ask(feed.url, seconds=90, **fields), p.AckMessage)
    assert engine.view("agent-1").held_until == pytest.approx(engine.clock.wall() + 90)


async def test_release_half_opens_and_release_close_closes(engine: Engine, feed) -> None:
    call(engine, "agent-1")
    assert isinstance(await ask(feed.url, **HOLD), p.AckMessage)
    answer = await ask(feed.url, type="release", key="agent-1", actor="bob")
    assert isinstance(answer, p.AckMessage)
    assert engine.view("agent-1").state == "half_open"
    [released] = engine.audit.query(types=ev.RELEASED)
    assert released.fields["actor"] == "remote:operator:bob"
    assert isinstance(await ask(feed.url, **HOLD), p.AckMessage)
    answer = await ask(feed.url, type="release", key="agent-1", close=True, reason="done")
    assert isinstance(answer, p.AckMessage)
    assert engine.view("agent-1").state == "closed"
    [reset] = engine.audit.query(types=ev.RESET)
    assert reset.fields["actor"] == "remote:operator"


async def test_mode_switches_to_shadow_and_back_audited(engine: Engine, feed) -> None:
    call(engine, "agent-1")
    answer = await ask(feed.url, type="mode", key="agent-1", mode="shadow", reason="trial")
    assert isinstance(answer, p.AckMessage)
    assert engine.view("agent-1").mode == "shadow"
    answer = await ask(feed.url, type="mode", key="agent-1", mode="enforce", reason="done")
    assert isinstance(answer, p.AckMessage)
    assert engine.view("agent-1").mode == "enforce"
    moves = sorted(engine.audit.query(types=ev.MODE), key=lambda m: m.seq)
    assert [(m.fields["from"], m.fields["to"]) for m in moves] == [
        ("enforce", "shadow"),
        ("shadow", "enforce"),
    ]


@pytest.mark.parametrize(
    "fields",
    [
        HOLD,
        {"type": "release", "key": "agent-1"},
        {"type": "mode", "key": "agent-1", "mode": "shadow", "reason": "x"},
    ],
)
async def test_a_viewer_is_forbidden_as_for_reset_and_nothing_changes(
    engine: Engine, feed, fields
) -> None:
    call(engine, "agent-1")
    seq, before = engine.seq, engine.view("agent-1")
    answer = await ask(feed.url, VIEWER, **fields)
    assert isinstance(answer, p.ErrorMessage) and answer.code == p.FORBIDDEN
    assert (engine.seq, engine.view("agent-1")) == (seq, before)


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({**HOLD, "key": "nobody"}, p.UNKNOWN_KEY),
        ({"type": "release", "key": "nobody"}, p.UNKNOWN_KEY),
        ({"type": "mode", "key": "nobody", "mode": "shadow", "reason": "x"}, p.UNKNOWN_KEY),
        ({**HOLD, "reason": ""}, p.INVALID),
        ({**HOLD, "reason": "  \t"}, p.INVALID),
        ({k: v for k, v in HOLD.items() if k != "reason"}, p.INVALID),
        ({k: v for k, v in HOLD.items() if k != "duration"}, p.INVALID),
        ({**HOLD, "duration": "30 minutes"}, p.INVALID),
        ({**HOLD, "duration": "1d"}, p.INVALID),
        ({**HOLD, "duration": "25h"}, p.INVALID),  # past max_hold_seconds (24 h)
        ({**HOLD, "seconds": 90}, p.INVALID),  # both lengths
        ({**{k: v for k, v in HOLD.items() if k != "duration"}, "seconds": 0}, p.INVALID),
        ({**{k: v for k, v in HOLD.items() if k != "duration"}, "seconds": 1e9}, p.INVALID),
        ({**HOLD, "until": "tomorrow"}, p.INVALID),
        ({"type": "mode", "key": "agent-1", "mode": "off", "reason": "x"}, p.INVALID),
        ({"type": "mode", "key": "agent-1", "mode": "shadow"}, p.INVALID),
        ({"type": "release", "key": "agent-1", "close": "yes"}, p.INVALID),
        ({"type": "release", "key": "agent-1"}, p.NOT_HELD),
        ({**HOLD, "version": 2}, p.UNSUPPORTED_VERSION),
    ],
)
async def test_bad_writes_get_the_error_reset_gets_and_change_nothing(
    engine: Engine, feed, fields, code
) -> None:
    call(engine, "agent-1")
    seq, before = engine.seq, engine.view("agent-1")
    answer = await ask(feed.url, **fields)
    assert isinstance(answer, p.ErrorMessage), answer
    assert (answer.code, answer.request_id) == (code, "r1")
    assert answer.message
    assert (engine.seq, engine.view("agent-1")) == (seq, before)
    assert engine.audit.query(types=[ev.HELD, ev.RELEASED, ev.MODE]) == []
