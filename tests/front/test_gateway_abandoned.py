"""An agent whose connection goes away while its probe is on the wire abandons the call: a
neutral completion, as at every door (DESIGN, "Both policies"). Counted at the platform's
wire."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from breakerdeck.engine import events as ev
from breakerdeck.engine.events import Event
from breakerdeck.fixtures.faults import OK, REFUSED, SLOW, Fault
from breakerdeck.fixtures.platform import FakePlatform
from breakerdeck.fixtures.server import PlatformServer
from tests.front.conftest import Rig, StartRig, credential_file, write_config


@pytest.fixture
def payments() -> Iterator[tuple[FakePlatform, PlatformServer]]:
    platform = FakePlatform("payments")
    with PlatformServer({"payments": platform}, hang_seconds=2) as server:
        yield platform, server


async def _tripped(
    tmp_path: Path, platform: FakePlatform, server: PlatformServer, start: StartRig
) -> tuple[Rig, list[Event]]:
    cred = credential_file(tmp_path)
    config = write_config(
        tmp_path, {"payments": server.url("payments")}, {"billing": {"payments": cred}}
    )
    rig: Rig = await start(config, deadline=30.0)
    lines: list[Event] = []
    rig.engine.subscribe(lines.append)
    platform.set_fault(REFUSED)
    for _ in range(5):
        await rig.call("billing", "/p/payments/x")
    rig.clock.advance(300)
    return rig, lines


async def _agent_leaves_mid_probe(rig: Rig, platform: FakePlatform, lines: list[Event]) -> Event:
    """The probe reaches the wire and hangs there (until the fixture closes); its agent hangs
    up; its line, once written."""
    platform.set_fault(Fault(SLOW.kind, delay=60))
    before, written = platform.requests, len(lines)
    probe = asyncio.create_task(rig.call("billing", "/p/payments/x"))
    async with asyncio.timeout(30):  # the premise: the probe is on the wire
        while platform.requests == before:
            await asyncio.sleep(0.02)
    probe.cancel()  # the agent's connection closes
    with pytest.raises(asyncio.CancelledError):
        await probe
    async with asyncio.timeout(30):
        while not [e for e in lines[written:] if e.type == ev.CALL_COMPLETED]:
            await asyncio.sleep(0.02)
    (line,) = [e for e in lines[written:] if e.type == ev.CALL_COMPLETED]
    return line


async def _three_probes_left(
    tmp_path: Path, payments: tuple[FakePlatform, PlatformServer], start: StartRig
) -> tuple[Rig, Event]:
    """Tripped, then three probes in a row whose agents leave them on the wire: the third's
    line."""
    platform, server = payments
    rig, lines = await _tripped(tmp_path, platform, server, start)
    for _ in range(2):
        await _agent_leaves_mid_probe(rig, platform, lines)
    return rig, await _agent_leaves_mid_probe(rig, platform, lines)


async def test_an_agent_leaving_mid_probe_frees_the_slot_at_once_and_counts_nothing(
    tmp_path: Path, payments: tuple[FakePlatform, PlatformServer], start_gateway: StartRig
) -> None:
    platform, server = payments
    rig, lines = await _tripped(tmp_path, platform, server, start_gateway)
    line = await _agent_leaves_mid_probe(rig, platform, lines)
    assert (line.fields["outcome"], line.fields["counted"]) == ("caller_error", False)
    assert (line.fields["fault"], line.fields["agent_status"]) == ("cancelled", 499)
    assert line.fields["probe"] is True
    assert rig.engine.view("billing").state == "half_open"
    platform.set_fault(OK)
    assert (await rig.call("billing", "/p/payments/x")).status_code == 200  # the next probe
    assert platform.requests == 5 + 1 + 1
    assert rig.engine.view("billing").state == "closed"


async def test_the_third_probe_its_agent_leaves_counts_as_a_timeout(
    tmp_path: Path, payments: tuple[FakePlatform, PlatformServer], start_gateway: StartRig
) -> None:
    rig, third = await _three_probes_left(tmp_path, payments, start_gateway)
    assert (third.fields["outcome"], third.fields["fault"]) == ("upstream_failure", "timeout")
    assert third.fields["counted"] is True
    view = rig.engine.view("billing")
    assert (view.state, view.failed_probes) == ("open", 1)


async def test_the_gateways_metrics_count_the_third_abandoned_probe_as_the_log_does(
    tmp_path: Path, payments: tuple[FakePlatform, PlatformServer], start_gateway: StartRig
) -> None:
    rig, _ = await _three_probes_left(tmp_path, payments, start_gateway)
    scraped = (await rig.client.get(rig.url + "/-/metrics")).text
    abandoned = 'breakerdeck_calls_total{counted="false",key="billing",outcome="caller_error"}'
    counted = 'breakerdeck_calls_total{counted="true",key="billing",outcome="upstream_failure"}'
    assert f"{abandoned} 2.0" in scraped
    assert f"{counted} 6.0" in scraped  # the five that tripped it, and the third probe
