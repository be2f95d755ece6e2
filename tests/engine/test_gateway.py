"""The `agent` policy through the gateway: statuses, bodies and counting, at the fake wire."""

import asyncio
from datetime import UTC, datetime

import httpx
import pytest

from breakerdeck.engine import events as ev
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.gateway import Gateway
from breakerdeck.engine.harness import Refusal
from breakerdeck.engine.outcomes import OutcomeClass
from breakerdeck.engine.policy import AgentPolicy
from breakerdeck.fixtures.faults import Fault, FaultKind
from breakerdeck.fixtures.platform import FakePlatform, FakeVault

OK = Fault(FaultKind.OK)
TIMEOUT = Fault(FaultKind.TIMEOUT)
REFUSED = Fault(FaultKind.REFUSED)
SLOW = Fault(FaultKind.SLOW, delay=20.0)

AGENT = "ava"
HALT_KEYS = {"state", "recoverable_by", "cause", "retry_after_seconds", "instructions"}


class ExpiredToken(FakePlatform):
    """The stored token has expired; a refresh hands out one the platform accepts."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.credential_valid = False

    def answer(self, method, path, idempotency_key):
        action = super().answer(method, path, idempotency_key)
        if path.endswith("/oauth/token"):
            self.credential_valid = True
        return action


@pytest.fixture
def engine(loop_clock, tmp_path):
    engine = Engine(AgentPolicy(), clock=loop_clock, state_dir=tmp_path / "state")
    yield engine
    engine.close()


@pytest.fixture
def vault() -> FakeVault:
    return FakeVault()


@pytest.fixture
def lines(engine):
    seen = []
    engine.subscribe(seen.append)
    return seen


class Agents:
    """Agent status as the gateway's authorize hook sees it: suspended agents are refused."""

    def __init__(self) -> None:
        self.suspended: set[str] = set()
        self.pending: set[str] = set()
        self.scopes_missing: set[str] = set()

    def __call__(self, agent, platform, body):
        if agent in self.suspended:
            return Refusal(OutcomeClass.PERMISSION_DENIED, f"agent {agent} is suspended")
        if agent in self.scopes_missing:
            return Refusal(OutcomeClass.PERMISSION_DENIED, f"scope not granted on {platform}")
        if agent in self.pending:
            return Refusal(OutcomeClass.PENDING_APPROVAL, "queued for a human's approval")
        return None


@pytest.fixture
def agents() -> Agents:
    return Agents()


def client(platform: FakePlatform) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=platform, base_url=f"https://{platform.name}.test")


@pytest.fixture
def crm() -> FakePlatform:
    return FakePlatform("crm")


@pytest.fixture
def gateway(engine, platform, crm, vault, agents) -> Gateway:
    return Gateway(
        engine, {"payments": client(platform), "crm": client(crm)}, vault, authorize=agents
    )


async def call(gateway: Gateway, platform: str = "payments", agent: str = AGENT):
    return await gateway.call(agent, platform, path="/charges", json={"amount": 5})


def of_type(lines, type_):
    return [e for e in lines if e.type == type_]


def assert_halted(response, *, reason, state, cause):
    assert response.status == 403
    assert set(response.body) == {"error", "reason", "halt"}
    assert response.body["error"] == "agent_halted"
    assert response.body["reason"] == reason
    halt = response.body["halt"]
    assert set(halt) == HALT_KEYS
    assert halt["state"] == state
    assert halt["recoverable_by"] == "time"
    assert halt["cause"] == cause
    assert isinstance(halt["retry_after_seconds"], int) and halt["retry_after_seconds"] >= 5
    assert isinstance(halt["instructions"], str) and "probe" in halt["instructions"]


async def trip_upstream(gateway, platform):
    platform.set_fault(REFUSED)
    for _ in range(5):
        assert (await call(gateway)).status == 502


# -- thresholds ------------------------------------------------------------------------------


async def test_auth_failures_trip_at_three_and_the_fourth_call_is_halted_off_the_wire(
    gateway, platform, vault, engine
):
    platform.revoke_credential()
    for _ in range(3):
        response = await call(gateway)
        assert response.status == 401
    assert engine.view(AGENT).state == "open"
    sent, refreshes, fetches = platform.requests, platform.refreshes, vault.fetches
    assert (sent, refreshes) == (3, 3)

    response = await call(gateway)

    assert_halted(
        response, reason="circuit_breaker_open", state="breaker_open", cause="breaker_auth_failure"
    )
    assert 295 <= response.body["halt"]["retry_after_seconds"] <= 300
    assert (platform.requests, platform.refreshes, vault.fetches) == (sent, refreshes, fetches)


async def test_two_auth_failures_do_not_trip(gateway, platform, engine):
    platform.revoke_credential()
    for _ in range(2):
        await call(gateway)
    assert engine.view(AGENT).state == "closed" and engine.view(AGENT).count == 2


async def test_timeouts_trip_at_five_with_502s_and_cause_upstream(gateway, platform, engine):
    platform.set_fault(TIMEOUT)
    for n in range(5):
        response = await call(gateway)
        assert response.status == 502
        assert response.body["error"] == "upstream_failure"
        assert engine.view(AGENT).state == ("open" if n == 4 else "closed")
    assert platform.requests == 5

    response = await call(gateway)

    assert_halted(
        response,
        reason="circuit_breaker_open",
        state="breaker_open",
        cause="breaker_upstream_failure",
    )
    assert platform.requests == 5


async def test_refused_connections_trip_at_five(gateway, platform, engine, lines):
    await trip_upstream(gateway, platform)
    (tripped,) = of_type(lines, ev.TRIPPED)
    assert tripped.fields["failure_class"] == "upstream_failure"
    assert tripped.fields["count"] == 5
    assert tripped.fields["cooldown_seconds"] == 300
    assert (await call(gateway)).status == 403
    assert platform.requests == 5


async def test_a_timeout_costs_its_30_s_deadline_in_simulated_time(gateway, platform):
    platform.set_fault(TIMEOUT)
    loop = asyncio.get_running_loop()
    start = loop.time()
    await call(gateway)
    assert loop.time() - start == 30


async def test_one_breaker_per_agent_across_its_platforms(gateway, platform, crm, engine):
    platform.set_fault(REFUSED)
    crm.set_fault(REFUSED)
    for name in ("payments", "crm", "payments", "crm", "payments"):
        await call(gateway, name)
    assert engine.view(AGENT).state == "open"
    crm.set_fault(OK)
    assert (await call(gateway, "crm")).status == 403
    assert crm.requests == 2
    assert (await call(gateway, "crm", agent="bo")).status == 200


# -- one counter: the design's examples -------------------------------------------------------


async def auth_failure(gateway, platform):
    platform.set_fault(OK)
    platform.revoke_credential()
    assert (await call(gateway)).status == 401
    platform.fix_credential()


async def upstream_failure(gateway, platform):
    platform.set_fault(REFUSED)
    assert (await call(gateway)).status == 502


async def test_upstream_upstream_auth_trips_with_cause_auth_at_count_three(
    gateway, platform, lines
):
    await upstream_failure(gateway, platform)
    await upstream_failure(gateway, platform)
    await auth_failure(gateway, platform)
    (tripped,) = of_type(lines, ev.TRIPPED)
    assert tripped.fields["failure_class"] == "auth_failure" and tripped.fields["count"] == 3
    platform.set_fault(OK)
    assert_halted(
        await call(gateway),
        reason="circuit_breaker_open",
        state="breaker_open",
        cause="breaker_auth_failure",
    )


async def test_auth_upstream_upstream_does_not_trip(gateway, platform, engine, lines):
    await auth_failure(gateway, platform)
    await upstream_failure(gateway, platform)
    await upstream_failure(gateway, platform)
    assert of_type(lines, ev.TRIPPED) == []
    assert engine.view(AGENT).count == 3


async def test_four_upstream_then_auth_trips_with_cause_auth_at_count_five(
    gateway, platform, lines
):
    for _ in range(4):
        await upstream_failure(gateway, platform)
    await auth_failure(gateway, platform)
    (tripped,) = of_type(lines, ev.TRIPPED)
    assert tripped.fields["failure_class"] == "auth_failure" and tripped.fields["count"] == 5


# -- what counts as an auth failure ------------------------------------------------------------


async def test_a_401_whose_refresh_works_and_retry_succeeds_is_a_success(
    gateway, vault, engine, lines
):
    expired = ExpiredToken("payments")
    gateway.clients["payments"] = client(expired)
    response = await call(gateway)
    assert response.status == 200
    assert response.body["ok"] is True
    (line,) = of_type(lines, ev.CALL_COMPLETED)
    assert line.fields["refresh"] == "ok"
    assert line.fields["outcome"] == "success" and line.fields["counted"] is False
    assert line.fields["attempts"] == 2 == expired.requests
    assert engine.view(AGENT).count == 0


async def test_a_401_whose_refresh_works_resets_an_earlier_count(gateway, platform, engine):
    for _ in range(4):
        await upstream_failure(gateway, platform)
    gateway.clients["payments"] = client(ExpiredToken("payments"))
    assert (await call(gateway)).status == 200
    assert engine.view(AGENT).count == 0


async def test_a_401_with_a_failed_refresh_counts_and_answers_reauth_failed(
    gateway, platform, engine, lines
):
    platform.revoke_credential()
    response = await call(gateway)
    assert response.status == 401
    assert response.body["error"] == "reauth_failed"
    assert response.body["platform"] == "payments"
    assert isinstance(response.body["message"], str) and response.body["message"]
    (line,) = of_type(lines, ev.CALL_COMPLETED)
    assert line.fields["refresh"] == "failed"
    assert line.fields["outcome"] == "auth_failure" and line.fields["counted"] is True
    assert line.fields["platform_status"] == 401 and line.fields["agent_status"] == 401
    assert engine.view(AGENT).count == 1


async def test_a_refreshed_token_rejected_again_is_an_auth_failure(gateway, platform, engine):
    platform.credential_valid = False  # refresh works, the new token is refused too
    response = await call(gateway)
    assert response.status == 401 and response.body["error"] == "reauth_failed"
    assert (platform.requests, platform.refreshes) == (2, 1)
    assert engine.view(AGENT).count == 1


# -- never counted ---------------------------------------------------------------------------


@pytest.mark.parametrize("status", [404, 422, 429, 500, 503])
async def test_platform_error_responses_are_relayed_as_is_and_never_counted(
    gateway, platform, engine, lines, status
):
    platform.set_fault(Fault.http(status))
    for _ in range(20):
        response = await call(gateway)
        assert response.status == status
        assert response.body == {"error": response.body["error"], "status": status}
    assert platform.requests == 20
    view = engine.view(AGENT)
    assert (view.state, view.count) == ("closed", 0)
    outcomes = {
        (e.fields["outcome"], e.fields["counted"]) for e in of_type(lines, ev.CALL_COMPLETED)
    }
    assert outcomes == {("upstream_error", False)}


async def test_relayed_errors_neither_add_to_nor_reset_the_count(gateway, platform, engine):
    for _ in range(4):
        await upstream_failure(gateway, platform)
    platform.set_fault(Fault.http(503))
    for _ in range(10):
        await call(gateway)
    assert engine.view(AGENT).count == 4
    await upstream_failure(gateway, platform)
    assert engine.view(AGENT).state == "open"


async def test_a_429_with_a_day_long_retry_after_is_relayed_and_never_counted(
    gateway, platform, engine
):
    platform.set_fault(Fault.http(429, retry_after="86400"))
    for _ in range(6):
        assert (await call(gateway)).status == 429
    assert engine.view(AGENT).count == 0


@pytest.mark.parametrize(
    ("hook", "status", "error"),
    [
        ("scopes_missing", 403, "permission_denied"),
        ("suspended", 403, "permission_denied"),
        ("pending", 202, None),
    ],
)
async def test_refusals_by_the_authorize_hook_never_count_and_send_nothing(
    gateway, platform, vault, engine, agents, lines, hook, status, error
):
    getattr(agents, hook).add(AGENT)
    for _ in range(10):
        response = await call(gateway)
        assert response.status == status
        if error:
            assert response.body["error"] == error
        else:
            assert response.body["status"] == "pending_approval"
    assert (platform.requests, platform.refreshes, vault.fetches) == (0, 0, 0)
    assert engine.view(AGENT).count == 0
    line = of_type(lines, ev.CALL_COMPLETED)[0]
    assert line.fields["attempts"] == 0 and line.fields["fault"] == "none"
    assert line.fields["counted"] is False and line.fields["admitted_as"] is None
    assert line.fields["admitted_t"] is None and line.fields["admitted_seq"] is None
    assert of_type(lines, ev.CALL_DENIED) == []


async def test_a_refusal_by_the_hook_never_takes_the_probe_slot(
    gateway, platform, engine, agents, lines
):
    await trip_upstream(gateway, platform)
    await asyncio.sleep(300)
    agents.pending.add(AGENT)
    assert (await call(gateway)).status == 202
    agents.pending.clear()
    platform.set_fault(OK)
    assert (await call(gateway)).status == 200
    admitted = [e.fields["admitted_as"] for e in of_type(lines, ev.CALL_COMPLETED)]
    assert admitted[-2:] == [None, "probe"]
    assert engine.view(AGENT).state == "closed"


async def test_an_unreachable_vault_is_an_upstream_failure_with_no_request(
    gateway, platform, vault, engine, lines
):
    vault.down = True
    for _ in range(5):
        response = await call(gateway)
        assert response.status == 502
        assert response.body["error"] == "upstream_failure"
        assert "vault" in response.body["message"]
    assert platform.requests == 0
    assert vault.fetches == 5
    line = of_type(lines, ev.CALL_COMPLETED)[0]
    assert line.fields["fault"] == "vault_down" and line.fields["attempts"] == 0
    assert line.fields["outcome"] == "upstream_failure" and line.fields["counted"] is True
    (tripped,) = of_type(lines, ev.TRIPPED)
    assert tripped.fields["failure_class"] == "upstream_failure"
    assert_halted(
        await call(gateway),
        reason="circuit_breaker_open",
        state="breaker_open",
        cause="breaker_upstream_failure",
    )
    assert vault.fetches == 5


# -- open, half-open, the probe -------------------------------------------------------------


async def test_calls_are_refused_until_300_s_after_the_trip(gateway, platform, lines):
    await trip_upstream(gateway, platform)
    platform.set_fault(OK)
    await asyncio.sleep(299)
    response = await call(gateway)
    assert response.status == 403
    assert response.body["halt"]["retry_after_seconds"] == 5  # 1 s left, shown as at least 5
    await asyncio.sleep(1)
    assert (await call(gateway)).status == 200
    assert platform.requests == 6


async def test_while_the_probe_is_out_others_get_probe_in_flight(gateway, platform, engine, lines):
    await trip_upstream(gateway, platform)
    await asyncio.sleep(300)
    platform.set_fault(SLOW)
    probe = asyncio.create_task(call(gateway))
    await asyncio.sleep(1)
    assert engine.view(AGENT).state == "half_open"

    response = await call(gateway)

    assert_halted(
        response,
        reason="probe_in_flight",
        state="breaker_half_open",
        cause="breaker_upstream_failure",
    )
    assert platform.requests == 6
    (denied,) = of_type(lines, ev.CALL_DENIED)[-1:]
    assert denied.fields["reason"] == "probe_in_flight"
    assert (await probe).status == 200
    assert engine.view(AGENT).state == "closed"


async def test_a_failed_probe_reopens_for_another_300_s(gateway, platform, engine, lines):
    await trip_upstream(gateway, platform)
    await asyncio.sleep(300)
    assert (await call(gateway)).status == 502
    (reopened,) = of_type(lines, ev.REOPENED)
    assert reopened.fields["cooldown_seconds"] == 300
    assert engine.view(AGENT).state == "open"
    await asyncio.sleep(299)
    assert (await call(gateway)).status == 403
    assert platform.requests == 6


async def test_an_uncounted_probe_outcome_frees_the_slot_and_stays_half_open(
    gateway, platform, engine, lines
):
    await trip_upstream(gateway, platform)
    await asyncio.sleep(300)
    platform.set_fault(Fault.http(404))
    assert (await call(gateway)).status == 404
    assert engine.view(AGENT).state == "half_open"
    platform.set_fault(OK)
    assert (await call(gateway)).status == 200
    probes = [e.fields["admitted_as"] for e in of_type(lines, ev.CALL_COMPLETED)[-2:]]
    assert probes == ["probe", "probe"]
    assert len(of_type(lines, ev.HALF_OPEN)) == 1


# -- success resets from any state --------------------------------------------------------------


async def test_a_success_resets_a_closed_count(gateway, platform, engine):
    for _ in range(4):
        await upstream_failure(gateway, platform)
    platform.set_fault(OK)
    assert (await call(gateway)).status == 200
    assert engine.view(AGENT).count == 0
    for _ in range(4):
        await upstream_failure(gateway, platform)
    assert engine.view(AGENT).state == "closed"


async def test_a_late_success_closes_an_open_breaker(gateway, platform, engine, lines):
    platform.set_fault(SLOW)
    slow = asyncio.create_task(call(gateway))
    await asyncio.sleep(1)
    await trip_upstream(gateway, platform)
    assert engine.view(AGENT).state == "open"

    assert (await slow).status == 200

    assert engine.view(AGENT).state == "closed" and engine.view(AGENT).count == 0
    assert [e.type for e in lines[-2:]] == [ev.CALL_COMPLETED, ev.RECOVERED]
    assert lines[-1].fields["cause_seq"] == lines[-2].seq


async def test_a_successful_probe_closes_a_half_open_breaker(gateway, platform, engine, lines):
    await trip_upstream(gateway, platform)
    await asyncio.sleep(300)
    platform.set_fault(OK)
    assert (await call(gateway)).status == 200
    view = engine.view(AGENT)
    assert (view.state, view.count, view.failed_probes) == ("closed", 0, 0)
    assert [e.type for e in lines[-3:]] == [ev.HALF_OPEN, ev.CALL_COMPLETED, ev.RECOVERED]


# -- the window ------------------------------------------------------------------------------


async def test_a_failure_more_than_600_s_after_the_last_starts_the_count_again(
    gateway, platform, engine
):
    for _ in range(4):
        await upstream_failure(gateway, platform)
    await asyncio.sleep(601)
    await upstream_failure(gateway, platform)
    assert engine.view(AGENT).count == 1 and engine.view(AGENT).state == "closed"


async def test_failures_600_s_apart_still_share_the_count(gateway, platform, engine):
    for _ in range(4):
        await upstream_failure(gateway, platform)
    await asyncio.sleep(600)
    await upstream_failure(gateway, platform)
    assert engine.view(AGENT).state == "open"


async def test_the_window_runs_from_the_last_counted_failure(gateway, platform, engine):
    for _ in range(4):
        await upstream_failure(gateway, platform)
        await asyncio.sleep(500)
    await upstream_failure(gateway, platform)
    assert engine.view(AGENT).state == "open"


# -- operator reset --------------------------------------------------------------------------


async def test_reset_writes_circuit_breaker_reset_with_actor_and_reason(gateway, platform, engine):
    await trip_upstream(gateway, platform)
    event = engine.reset(AGENT, actor="alice", reason="payments is back, confirmed by vendor")
    assert event.type == ev.RESET
    (logged,) = engine.audit.query(key=AGENT, types=[ev.RESET])
    assert logged.agent == AGENT
    assert logged.fields["actor"] == "alice"
    assert logged.fields["reason"] == "payments is back, confirmed by vendor"
    view = engine.view(AGENT)
    assert (view.state, view.count) == ("closed", 0)
    platform.set_fault(OK)
    assert (await call(gateway)).status == 200


async def test_resetting_a_closed_breaker_is_allowed_and_audited(gateway, platform, engine):
    await upstream_failure(gateway, platform)
    engine.reset(AGENT, actor="bob", reason="tidying up")
    assert engine.view(AGENT).count == 0
    assert [e.fields["actor"] for e in engine.audit.query(agent=AGENT, types=[ev.RESET])] == ["bob"]


# -- the breaker is separate from the agent's status ------------------------------------------


async def test_tripping_does_not_suspend_the_agent(gateway, platform, agents, engine):
    await trip_upstream(gateway, platform)
    assert agents.suspended == set()
    response = await call(gateway)
    assert response.body["error"] == "agent_halted"  # halted by the breaker, not suspended


async def test_suspend_and_reactivate_keep_an_open_breaker_open(gateway, platform, agents, engine):
    await trip_upstream(gateway, platform)
    before = engine.view(AGENT)
    agents.suspended.add(AGENT)
    for _ in range(3):
        assert (await call(gateway)).body["error"] == "permission_denied"
    agents.suspended.discard(AGENT)
    after = engine.view(AGENT)
    assert (after.state, after.count, after.opened_at) == (
        before.state,
        before.count,
        before.opened_at,
    )
    assert_halted(
        await call(gateway),
        reason="circuit_breaker_open",
        state="breaker_open",
        cause="breaker_upstream_failure",
    )
    assert platform.requests == 5


async def test_suspend_and_reactivate_keep_a_closed_count(gateway, platform, agents, engine):
    for _ in range(3):
        await upstream_failure(gateway, platform)
    agents.suspended.add(AGENT)
    await call(gateway)
    agents.suspended.discard(AGENT)
    assert engine.view(AGENT).count == 3
    await upstream_failure(gateway, platform)
    await upstream_failure(gateway, platform)
    assert engine.view(AGENT).state == "open"


async def test_unknown_platform_is_a_clear_404_and_touches_no_breaker(gateway, engine):
    response = await gateway.call(AGENT, "paymnets")
    assert response.status == 404
    assert "payments" in response.body["message"] and "paymnets" in response.body["message"]
    keys = engine.keys()
    assert AGENT not in keys


async def test_the_gateway_refuses_a_tool_policy_engine(tool_engine, vault):
    with pytest.raises(TypeError, match="agent"):
        Gateway(tool_engine, {}, vault)


async def test_fifty_concurrent_calls_in_half_open_admit_exactly_one(gateway, platform, engine):
    await trip_upstream(gateway, platform)
    await asyncio.sleep(300)
    platform.set_fault(SLOW)
    responses = await asyncio.gather(*(call(gateway) for _ in range(50)))
    statuses = sorted(r.status for r in responses)
    assert statuses == [200] + [403] * 49
    assert {r.body["reason"] for r in responses if r.status == 403} == {"probe_in_flight"}
    assert platform.requests == 6
    assert engine.view(AGENT).state == "closed"


# -- bodies that cannot be sent, vaults that never answer -----------------------------------

WHEN = datetime(2026, 1, 1, tzinfo=UTC)


async def test_a_body_that_cannot_be_sent_as_json_is_a_400_before_the_breaker(
    gateway, platform, vault, engine, lines
):
    response = await gateway.call(AGENT, "payments", path="/charges", json={"when": WHEN})
    assert response.status == 400
    assert response.body["error"] == "invalid_request"
    assert "cannot be sent as JSON" in response.body["message"]
    assert (platform.requests, vault.fetches) == (0, 0)
    (line,) = of_type(lines, ev.CALL_COMPLETED)
    assert (line.fields["attempts"], line.fields["fault"]) == (0, "none")
    assert line.fields["admitted_as"] is None and not line.fields["counted"]
    assert line.fields["agent_status"] == 400


async def test_a_body_that_cannot_be_sent_never_takes_the_probe_slot(gateway, platform, engine):
    await trip_upstream(gateway, platform)
    await asyncio.sleep(300)
    platform.set_fault(OK)
    response = await gateway.call(AGENT, "payments", json={"amount": float("nan")})
    assert response.status == 400
    assert (await call(gateway)).status == 200
    assert engine.view(AGENT).state == "closed"


class SlowVault(FakeVault):
    """A vault that answers after `delay` simulated seconds (a hung one: far beyond any
    deadline)."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    async def fetch(self, agent: str, platform: str) -> str:
        await asyncio.sleep(self.delay)
        return await super().fetch(agent, platform)


class SlowExpiredToken(ExpiredToken):
    """Every request, the refresh too, takes `delay` simulated seconds."""

    def __init__(self, name: str, delay: float) -> None:
        super().__init__(name)
        self.delay = delay

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(self.delay)
        return await super().handle_async_request(request)


async def test_a_vault_that_never_answers_is_a_counted_upstream_failure_at_the_deadline(
    engine, platform, lines
):
    gateway = Gateway(engine, {"payments": client(platform)}, SlowVault(10**6))
    loop = asyncio.get_running_loop()
    start = loop.time()
    response = await call(gateway)
    assert response.status == 502 and "vault" in response.body["message"]
    assert loop.time() - start == 30
    assert platform.requests == 0
    (line,) = of_type(lines, ev.CALL_COMPLETED)
    assert line.fields["fault"] == "vault_down" and line.fields["counted"] is True


async def test_a_probe_lease_covers_the_vault_both_attempts_and_the_refresh(engine, lines):
    """Each of the four steps takes 29 s: 116 s in all, well within what the probe may use."""
    payments = SlowExpiredToken("payments", delay=0)
    vault = SlowVault(0)
    gateway = Gateway(engine, {"payments": client(payments)}, vault)
    await trip_upstream(gateway, payments)
    await asyncio.sleep(300)
    payments.set_fault(OK)
    payments.credential_valid = False
    payments.delay = vault.delay = 29

    response = await call(gateway)

    assert response.status == 200
    probe = of_type(lines, ev.CALL_COMPLETED)[-1]
    assert probe.fields["probe"] is True and probe.fields["refresh"] == "ok"
    assert "expired" not in [e.fields["fault"] for e in of_type(lines, ev.CALL_COMPLETED)]
    assert engine.view(AGENT).state == "closed"


# -- the caller's path and method -------------------------------------------------------------


class Recorder:
    """A platform at `https://payments.test/api` that notes where each request went."""

    def __init__(self) -> None:
        self.urls: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.urls.append(str(request.url))
        return httpx.Response(200, json={"ok": True})

    def gateway(self, engine) -> Gateway:
        transport = httpx.MockTransport(self)
        payments = httpx.AsyncClient(transport=transport, base_url="https://payments.test/api")
        return Gateway(engine, {"payments": payments}, FakeVault())


@pytest.mark.parametrize(
    ("path", "url"),
    [
        ("/v1/charges?x=1", "https://payments.test/api/v1/charges?x=1"),
        ("//evil.test/x", "https://payments.test/api/evil.test/x"),
        ("@evil.test/x", "https://payments.test/api/@evil.test/x"),
        ("http://evil.test/x", "https://payments.test/api/http://evil.test/x"),
        ("https://evil.test:444/x", "https://payments.test/api/https://evil.test:444/x"),
        ("%2F%2Fevil.test/x", "https://payments.test/api/%2F%2Fevil.test/x"),
        ("/v1/../../../x", "https://payments.test/api/x"),
    ],
)
async def test_the_path_is_appended_to_base_url_and_never_changes_its_origin(engine, path, url):
    """An absolute target would have sent the agent's credential to another host."""
    recorder = Recorder()
    response = await recorder.gateway(engine).call(AGENT, "payments", method="GET", path=path)
    assert response.status == 200
    assert recorder.urls == [url]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/x\x00"),
        ("GET", "/x\r\nHost: evil.test"),
        ("GET", "/" + "x" * 70_000),
        ("GE T", "/"),
    ],
    ids=["nul", "crlf", "too_long", "bad_method"],
)
async def test_a_target_that_cannot_be_sent_is_a_400_before_the_breaker(
    engine, lines, method, path
):
    recorder = Recorder()
    response = await recorder.gateway(engine).call(AGENT, "payments", method=method, path=path)
    assert response.status == 400 and response.body["error"] == "invalid_request"
    assert recorder.urls == []
    (line,) = of_type(lines, ev.CALL_COMPLETED)
    assert (line.fields["attempts"], line.fields["fault"]) == (0, "none")


async def test_a_platform_answer_nested_too_deep_to_read_is_relayed_as_text(engine):
    """Decoding it raised RecursionError out of the call, after admission."""
    deep = "[" * 100_000 + "]" * 100_000
    transport = httpx.MockTransport(lambda request: httpx.Response(200, text=deep))
    payments = httpx.AsyncClient(transport=transport, base_url="https://payments.test")
    gateway = Gateway(engine, {"payments": payments}, FakeVault())
    response = await call(gateway)
    assert response.status == 200 and response.body == {"body": deep}
    assert engine.view(AGENT).count == 0
