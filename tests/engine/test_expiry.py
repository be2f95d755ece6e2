"""Time and late reports: expired probes, late completions, the re-check, half-open and pages.

Engine-level tests drive a `ManualClock`; harness tests run on the simulated loop.
"""

import asyncio

import httpx
import pytest
from pydantic import BaseModel

from breakerdeck.engine import events as ev
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.errors import UnknownKey
from breakerdeck.engine.harness import Harness, Tool
from breakerdeck.engine.outcomes import SUCCESS, Outcome, OutcomeClass
from breakerdeck.engine.policy import AgentPolicy, ToolPolicy
from breakerdeck.fixtures.faults import Fault, FaultKind
from breakerdeck.fixtures.platform import FakePlatform

KEY = "payments@default"
LEASE = 61.0  # the tool defaults: 2 x 30 s + 1 s backoff
UPSTREAM = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="refused")
NOT_FOUND = Outcome(OutcomeClass.CALLER_ERROR, detail="HTTP 404")


class Listing(BaseModel):
    ok: bool
    data: dict


# -- engine-level helpers ---------------------------------------------------------------------


class Rig:
    """An engine on a manual clock, with every event it writes and every page it raises."""

    def __init__(self, policy=None, **kwargs) -> None:
        self.clock = ManualClock()
        self.pages: list = []
        self.engine = Engine(
            policy or ToolPolicy(), clock=self.clock, page_hook=self.pages.append, **kwargs
        )
        self.lines: list[ev.Event] = []
        self.engine.subscribe(self.lines.append)

    def call(self, agent: str = "ava", key: str = KEY):
        return self.engine.enter(
            key=key, agent=agent, platform="payments", tool="charge", deadline_seconds=30
        )

    def admit(self, agent: str = "ava", key: str = KEY, lease: float = LEASE):
        call = self.call(agent, key)
        return call, self.engine.admit(call, lease)

    def run(self, outcome: Outcome, agent: str = "ava", key: str = KEY):
        call, admission = self.admit(agent, key)
        if not admission.allowed:
            return call, admission, None
        call.attempts = 2 if outcome.counted else 1
        line = self.complete(call, outcome)
        return call, admission, line

    def complete(self, call, outcome: Outcome):
        return self.engine.complete(
            call, outcome, fault="refused" if outcome.counted else "ok", agent_status="x"
        )

    def trip(self, key: str = KEY) -> None:
        for _ in range(3):
            self.run(UPSTREAM, key=key)
        assert self.engine.view(key).state == "open"

    def of_type(self, type_: str) -> list[ev.Event]:
        return [e for e in self.lines if e.type == type_]

    def after(self, event: ev.Event) -> list[ev.Event]:
        return [e for e in self.lines if e.seq > event.seq]


@pytest.fixture
def rig():
    rig = Rig()
    yield rig
    rig.engine.close()


# -- an expired probe ------------------------------------------------------------------------


def test_a_probe_that_never_reports_back_is_expired_at_its_lease_by_poll(rig):
    rig.trip()
    rig.clock.advance(30)
    probe, admission = rig.admit()
    assert admission.as_probe
    rig.clock.advance(LEASE + 1)  # the lease and its grace: still on time
    assert rig.engine.poll() == []

    rig.clock.advance(0.01)
    line, reopened = rig.engine.poll()

    assert line.type == ev.CALL_COMPLETED
    assert line.fields["call_id"] == probe.call_id
    assert line.fields["fault"] == "expired"
    assert line.fields["probe"] is True and line.fields["admitted_as"] == "probe"
    assert line.fields["outcome"] == "upstream_failure" and line.fields["counted"] is True
    assert reopened.type == ev.REOPENED
    assert reopened.fields["cause_seq"] == line.seq
    assert reopened.fields["cooldown_seconds"] == 60
    assert rig.engine.view(KEY).state == "open"


def test_an_expired_probe_is_noticed_by_the_next_admission_too(rig):
    rig.trip()
    rig.clock.advance(30)
    rig.admit()
    rig.clock.advance(LEASE + 2)
    _, admission = rig.admit(agent="bo")
    assert not admission.allowed and admission.reason.value == "circuit_breaker_open"
    assert [e.type for e in rig.lines[-3:]] == [ev.CALL_COMPLETED, ev.REOPENED, ev.CALL_DENIED]
    assert rig.lines[-3].fields["fault"] == "expired"


def test_the_late_report_of_an_expired_probe_is_a_second_line_with_probe_false(rig):
    rig.trip()
    rig.clock.advance(30)
    probe, _ = rig.admit()
    rig.clock.advance(LEASE + 2)
    rig.engine.poll()
    count = rig.engine.view(KEY).count

    late = rig.complete(probe, UPSTREAM)

    lines = [e for e in rig.of_type(ev.CALL_COMPLETED) if e.fields["call_id"] == probe.call_id]
    assert [e.fields["probe"] for e in lines] == [True, False]
    assert lines[-1] is late and late.fields["admitted_as"] == "probe"
    view = rig.engine.view(KEY)
    assert view.state == "open" and view.count == count + 1  # counted, no state change
    assert rig.after(late) == []


def test_a_late_success_of_an_expired_probe_closes_the_breaker_from_open(rig):
    rig.trip()
    rig.clock.advance(30)
    probe, _ = rig.admit()
    rig.clock.advance(LEASE + 2)
    rig.engine.poll()
    assert rig.engine.view(KEY).state == "open"

    late = rig.complete(probe, SUCCESS)

    assert late.fields["probe"] is False
    (recovered,) = rig.after(late)
    assert recovered.type == ev.RECOVERED and recovered.fields["cause_seq"] == late.seq
    view = rig.engine.view(KEY)
    assert (view.state, view.count, view.failed_probes) == ("closed", 0, 0)


def test_a_late_success_from_before_the_trip_closes_the_breaker(rig):
    early, _ = rig.admit()
    rig.trip()
    line = rig.complete(early, SUCCESS)
    assert line.fields["probe"] is False and line.fields["admitted_as"] == "normal"
    assert rig.after(line)[0].type == ev.RECOVERED
    assert rig.engine.view(KEY).state == "closed"


def test_a_late_counted_failure_while_open_adds_to_the_count_and_changes_no_state(rig):
    early, _ = rig.admit()
    rig.trip()
    line = rig.complete(early, UPSTREAM)
    assert rig.after(line) == []
    view = rig.engine.view(KEY)
    assert (view.state, view.count) == ("open", 4)


def test_a_late_success_ends_the_probe_so_its_later_failure_is_ordinary(rig):
    early, _ = rig.admit()
    rig.trip()
    rig.clock.advance(30)
    probe, _ = rig.admit()
    rig.complete(early, SUCCESS)  # closes; the probe is no longer the probe
    line = rig.complete(probe, UPSTREAM)
    assert line.fields["probe"] is False
    view = rig.engine.view(KEY)
    assert (view.state, view.count, view.failed_probes) == ("closed", 1, 0)


def test_a_reset_ends_the_probe_so_its_report_is_ordinary(rig):
    rig.trip()
    rig.clock.advance(30)
    probe, _ = rig.admit()
    rig.engine.reset(KEY, actor="alice", reason="backend fixed")
    line = rig.complete(probe, UPSTREAM)
    assert line.fields["probe"] is False
    assert rig.engine.view(KEY).state == "closed" and rig.engine.view(KEY).count == 1
    rig.clock.advance(LEASE + 5)
    assert rig.engine.poll() == []


# -- half-open and pages -----------------------------------------------------------------------


def test_half_open_is_written_once_per_open_to_half_open_transition(rig):
    rig.trip()
    rig.clock.advance(30)
    for _ in range(3):
        rig.engine.poll()
    probe, admission = rig.admit()
    assert admission.as_probe
    for agent in ("bo", "cy", "di"):
        assert rig.admit(agent=agent)[1].reason.value == "probe_in_flight"
    rig.engine.poll()
    assert len(rig.of_type(ev.HALF_OPEN)) == 1

    rig.complete(probe, UPSTREAM)  # reopens for 60 s
    rig.clock.advance(60)
    rig.engine.poll()
    rig.admit()
    rig.engine.poll()
    assert len(rig.of_type(ev.HALF_OPEN)) == 2


def test_an_uncounted_probe_outcome_frees_the_slot_without_a_new_half_open(rig):
    rig.trip()
    rig.clock.advance(30)
    probe, _ = rig.admit()
    line = rig.complete(probe, NOT_FOUND)
    assert line.fields["probe"] is True and rig.after(line) == []
    _, admission = rig.admit(agent="bo")
    assert admission.as_probe
    assert len(rig.of_type(ev.HALF_OPEN)) == 1


def fail_probe(rig: Rig, wait: float):
    rig.clock.advance(wait)
    call, admission = rig.admit()
    assert admission.as_probe
    return rig.complete(call, UPSTREAM)


def test_the_page_comes_right_after_the_second_failed_probes_reopened(rig):
    rig.trip()
    fail_probe(rig, 30)
    assert rig.of_type(ev.PAGE) == []
    line = fail_probe(rig, 60)

    reopened, page = rig.after(line)

    assert reopened.type == ev.REOPENED and reopened.fields["cause_seq"] == line.seq
    assert reopened.fields["cooldown_seconds"] == 300
    assert page.type == ev.PAGE and page.fields["cause_seq"] == reopened.seq
    assert page.seq == reopened.seq + 1
    assert rig.engine.view(KEY).paged


def test_the_page_hook_runs_once_per_open_episode(rig):
    rig.trip()
    for wait in (30, 60, 300, 900, 900):
        fail_probe(rig, wait)
    assert len(rig.pages) == 1 and len(rig.of_type(ev.PAGE)) == 1

    rig.clock.advance(900)
    call, _ = rig.admit()
    rig.complete(call, SUCCESS)
    rig.trip()
    fail_probe(rig, 30)
    fail_probe(rig, 60)

    assert len(rig.pages) == 2 and len(rig.of_type(ev.PAGE)) == 2
    (first, second) = rig.pages
    for page, event in zip(rig.pages, rig.of_type(ev.PAGE), strict=True):
        seq = page["seq"] if isinstance(page, dict) else page.seq
        assert seq == event.seq
    assert first != second


def test_an_expired_second_probe_pages_too(rig):
    rig.trip()
    fail_probe(rig, 30)
    rig.clock.advance(60)
    rig.admit()
    rig.clock.advance(LEASE + 2)
    line, reopened, page = rig.engine.poll()
    assert line.fields["fault"] == "expired"
    assert page.type == ev.PAGE and page.fields["cause_seq"] == reopened.seq
    assert len(rig.pages) == 1


def test_the_tool_ladder_grows_30_60_300_900_900(rig):
    rig.trip()
    assert rig.engine.view(KEY).cooldown == 30
    cooldowns = []
    for wait in (30, 60, 300, 900, 900):
        fail_probe(rig, wait)
        cooldowns.append(rig.engine.view(KEY).cooldown)
    assert cooldowns == [60, 300, 900, 900, 900]


def test_agent_probes_reopen_for_300_s_each_time():
    rig = Rig(AgentPolicy())
    try:
        for _ in range(5):
            rig.run(UPSTREAM, key="ava")
        for _ in range(3):
            rig.clock.advance(300)
            call, admission = rig.admit(key="ava", lease=90)
            assert admission.as_probe
            rig.complete(call, UPSTREAM)
            assert rig.engine.view("ava").cooldown == 300
        assert len(rig.pages) == 1
    finally:
        rig.engine.close()


# -- through the harness, on the simulated loop ---------------------------------------------


class StubbornBackend:
    """A function tool: fails, answers, or hangs ignoring every cancellation until released."""

    def __init__(self) -> None:
        self.mode = "fail"
        self.calls = 0
        self.release = asyncio.Event()

    async def __call__(self, args):
        self.calls += 1
        if self.mode == "fail":
            raise ConnectionRefusedError("connection refused")
        while self.mode == "hang" and not self.release.is_set():
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                continue  # deaf to its deadline: only `release` ends it
        return {"ok": True, "data": {}}


@pytest.fixture
def stubborn():
    return StubbornBackend()


@pytest.fixture
async def scheduled_engine(loop_clock, tmp_path):
    loop = asyncio.get_running_loop()
    engine = Engine(
        ToolPolicy(),
        clock=loop_clock,
        state_dir=tmp_path / "state",
        scheduler=lambda when, poll: loop.call_at(when, poll),
    )
    yield engine
    engine.close()


async def test_a_hung_probe_expires_on_schedule_and_its_late_success_closes(
    scheduled_engine, stubborn
):
    engine = scheduled_engine
    lines = []
    engine.subscribe(lines.append)
    harness = Harness(engine)
    harness.register(Tool("lookup", backend="ledger", function=stubborn, response_schema=Listing))
    key = "ledger@default"
    for _ in range(3):
        assert (await harness.call_tool("ava", "lookup"))["status"] == "tool_error"
    stubborn.mode = "hang"
    await asyncio.sleep(30)
    assert [e.type for e in lines[-1:]] == [ev.HALF_OPEN]  # written by the scheduled poll
    probe = asyncio.create_task(harness.call_tool("ava", "lookup"))
    await asyncio.sleep(1)
    assert engine.view(key).state == "half_open"

    await asyncio.sleep(LEASE + 1)

    expired, reopened = lines[-2:]
    assert expired.fields["fault"] == "expired" and expired.fields["probe"] is True
    assert reopened.type == ev.REOPENED and reopened.fields["cause_seq"] == expired.seq
    assert engine.view(key).state == "open"

    stubborn.release.set()
    result = await probe

    assert result["status"] == "ok"
    late, recovered = lines[-2:]
    assert late.fields["call_id"] == expired.fields["call_id"]
    assert late.fields["probe"] is False and late.fields["outcome"] == "success"
    assert recovered.type == ev.RECOVERED and recovered.fields["cause_seq"] == late.seq
    assert engine.view(key).state == "closed"


async def test_the_recheck_before_a_retry_never_turns_a_normal_call_into_the_probe(
    tool_engine, platform
):
    lines = []
    tool_engine.subscribe(lines.append)
    client = httpx.AsyncClient(transport=platform, base_url="https://payments.test")
    harness = Harness(tool_engine, {"payments": client})
    harness.register(Tool("patient", backend="payments", backoff_seconds=40))
    harness.register(Tool("once", backend="payments", attempts=1))
    platform.set_fault(Fault(FaultKind.REFUSED))
    patient = asyncio.create_task(harness.call_tool("ava", "patient"))
    await asyncio.sleep(1)  # its first attempt failed; it waits 40 s to retry
    for _ in range(3):
        await harness.call_tool("bo", "once")
    assert tool_engine.view(KEY).state == "open"
    await asyncio.sleep(35)
    tool_engine.poll()
    assert tool_engine.view(KEY).state == "half_open"

    result = await patient

    assert result["status"] == "circuit_open"
    assert platform.requests == 4  # the retry never went out
    (line,) = [e for e in lines if e.type == ev.CALL_COMPLETED and e.agent == "ava"]
    assert line.fields["admitted_as"] == "normal" and line.fields["probe"] is False
    assert line.fields["attempts"] == 1 and line.fields["agent_status"] == "circuit_open"
    assert line.fields["outcome"] == "upstream_failure"
    assert not [e for e in lines if e.type == ev.CALL_DENIED]
    breaker = tool_engine.breaker(KEY)
    assert breaker.state.value == "half_open" and breaker.probe_id is None
    platform.set_fault(Fault(FaultKind.OK))
    assert (await harness.call_tool("cy", "once"))["status"] == "ok"
    assert lines[-2].fields["admitted_as"] == "probe"


# -- bad input -------------------------------------------------------------------------------


def test_an_outcome_reported_twice_is_a_second_line_read_as_a_late_completion(rig):
    call, _, first = rig.run(UPSTREAM)
    second = rig.complete(call, UPSTREAM)
    assert second.fields["call_id"] == first.fields["call_id"]
    assert second.seq == first.seq + 1
    assert rig.engine.view(KEY).count == 2
    _, admission, _ = rig.run(SUCCESS)
    assert admission.allowed and rig.engine.view(KEY).count == 0


def test_a_success_reported_twice_is_harmless(rig):
    call, _, _ = rig.run(SUCCESS)
    rig.complete(call, SUCCESS)
    assert rig.engine.view(KEY).state == "closed"
    assert [e.type for e in rig.lines] == [ev.CALL_COMPLETED, ev.CALL_COMPLETED]


def test_resetting_an_unknown_key_names_it(rig):
    rig.run(SUCCESS)
    with pytest.raises(UnknownKey, match="crm@default") as raised:
        rig.engine.reset("crm@default", actor="alice", reason="typo")
    assert KEY in str(raised.value)
    assert isinstance(raised.value, KeyError)


def test_marking_an_unknown_credential_fixed_names_it(rig):
    with pytest.raises(UnknownKey, match="nope@default"):
        rig.engine.restore_credential("nope@default", actor="alice")


def test_viewing_an_unknown_key_names_it(rig):
    with pytest.raises(UnknownKey, match="ghost"):
        rig.engine.view("ghost")


def rate_limited(platform: FakePlatform, retry_after: str) -> None:
    platform.set_fault(Fault.http(429, retry_after=retry_after))


async def test_a_day_long_retry_after_opens_for_the_900_s_cap(harness, platform):
    rate_limited(platform, "86400")
    for _ in range(3):
        result = await harness.call_tool("ava", "charge")
        assert result["status"] == "tool_error" and result["retry_after_ms"] == 86_400_000
    view = harness.engine.view(KEY)
    assert (view.state, view.cooldown) == ("open", 900)
    assert platform.requests == 3


async def test_a_retry_after_as_an_http_date_a_day_ahead_is_capped_too(harness, platform):
    from email.utils import formatdate

    ahead = formatdate(harness.engine.clock.wall() + 86400, usegmt=True)
    rate_limited(platform, ahead)
    for _ in range(3):
        await harness.call_tool("ava", "charge")
    view = harness.engine.view(KEY)
    assert (view.state, view.cooldown) == ("open", 900)


async def test_a_probe_failing_with_a_long_retry_after_reopens_for_it(harness, platform):
    rate_limited(platform, "120")
    for _ in range(3):
        await harness.call_tool("ava", "charge")
    await asyncio.sleep(120)
    rate_limited(platform, "200")
    assert (await harness.call_tool("ava", "charge"))["status"] == "tool_error"
    assert harness.engine.view(KEY).cooldown == 200


@pytest.mark.parametrize("garbage", ["soon", "-5", "1e9", "10.5", "", "Fri, 99 Foo 2026"])
async def test_a_garbage_retry_after_is_read_as_absent_and_never_counted(
    harness, platform, garbage
):
    rate_limited(platform, garbage)
    result = await harness.call_tool("ava", "charge")
    assert result == {"status": "rate_limited", "tool": "charge"}
    assert platform.requests == 2
    assert harness.engine.view(KEY).count == 0


class RawRetryAfter(httpx.AsyncBaseTransport):
    """A backend that sends Retry-After bytes no fixture would: httpx reads them as latin-1."""

    def __init__(self, value: bytes) -> None:
        self.value = value
        self.requests = 0

    async def handle_async_request(self, request):
        self.requests += 1
        return httpx.Response(429, headers=[(b"retry-after", self.value)], json={})


@pytest.mark.parametrize("raw", [b"\xb2", b"1\xb2\xb3", b"\xff\xfe"])
async def test_a_non_ascii_retry_after_is_read_as_absent(tool_engine, raw):
    transport = RawRetryAfter(raw)
    harness = Harness(
        tool_engine, {"odd": httpx.AsyncClient(transport=transport, base_url="https://odd.test")}
    )
    harness.register(Tool("poke", backend="odd"))
    result = await harness.call_tool("ava", "poke")
    assert result == {"status": "rate_limited", "tool": "poke"}
    assert transport.requests == 2


def test_an_unknown_key_error_says_how_many_known_keys_it_left_out():
    engine = Engine(ToolPolicy(), clock=ManualClock())
    for n in range(12):
        engine.enter(key=f"b{n:02d}@c", agent="a", platform="b", tool="t", deadline_seconds=30)
    with pytest.raises(UnknownKey, match=r"known: b00@c, .*b09@c and 2 more"):
        engine.reset("nosuch@c", actor="ann", reason="test")
