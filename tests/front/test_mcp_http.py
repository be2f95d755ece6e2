"""Streamable HTTP: statuses read from the wire toward upstreams, and the host side's token."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from breakerdeck.engine.front.mcp.host_http import host_app
from breakerdeck.fixtures.mcp_server import FixtureControl
from tests.front.mcp_support import ANNOTATED, free_port, http_fixture, proxied

#: One worker runs the module: its tests share one fixture server (`served`).
pytestmark = pytest.mark.xdist_group("mcp-http")

FAST = {"deadline_seconds": 1.0, "backoff_seconds": 0.01}
#: What the fixture server keeps of a test in its control dir, beside its process's `starts`.
TEST_FILES = ("modes.json", "calls", "released")
#: The fixture server's URL and its control.
Upstream = tuple[str, FixtureControl]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Upstream]:
    """One fixture server on streamable HTTP for the module: a process costs a second of CPU
    importing the SDK, and the server keeps nothing of a test but its control dir's files."""
    ctl = FixtureControl(tmp_path_factory.mktemp("web"))
    with http_fixture(ctl.dir) as url:
        yield url, ctl


@pytest.fixture
def upstream(served: Upstream) -> Upstream:
    """The module's server with its control dir as new: no mode set, no call counted."""
    url, ctl = served
    for name in TEST_FILES:
        (ctl.dir / name).unlink(missing_ok=True)
    return url, ctl


def web(url: str, **settings: Any) -> dict[str, Any]:
    return {"url": url, **FAST, **settings}


async def test_an_http_403_stays_uncounted_though_the_sdk_reports_32603(upstream: Upstream) -> None:
    url, ctl = upstream
    async with proxied({"web": web(url)}) as bench:
        ctl.set_mode("http_403")
        for _ in range(10):
            result = await bench.call("web__lookup", {"query": "q"})
            assert result.structured_content["status"] == "permission_denied"
        assert ctl.calls() == 10
        assert bench.state("web") == "closed"
        assert bench.engine.breaker("web@default").count == 0


async def test_http_5xx_is_counted_and_three_open_the_breaker(upstream: Upstream) -> None:
    url, ctl = upstream
    async with proxied({"web": web(url)}) as bench:
        ctl.set_mode("http_500")
        for _ in range(3):
            result = await bench.call("web__lookup", {"query": "q"})
            assert result.structured_content["status"] == "tool_error"
        assert ctl.calls() == 6
        assert bench.state("web") == "open"


async def test_a_429_with_retry_after_beyond_the_deadline_opens_for_it(upstream: Upstream) -> None:
    url, ctl = upstream
    async with proxied({"web": web(url)}) as bench:
        ctl.set_mode("http_429", retry_after=120)
        for _ in range(3):
            result = await bench.call("web__lookup", {"query": "q"})
            assert result.structured_content["retry_after_ms"] == 120_000
        assert ctl.calls() == 3  # counted at once: never retried
        view = bench.engine.view("web@default")
        assert (view.state, view.cooldown) == ("open", 120.0)


async def test_a_429_within_the_deadline_is_waited_out_and_retried_uncounted(
    upstream: Upstream,
) -> None:
    url, ctl = upstream
    async with proxied({"web": web(url)}) as bench:
        ctl.set_mode("http_429", retry_after=0)
        result = await bench.call("web__charge", {"amount": 1})  # not idempotent: still retried
        assert result.structured_content["status"] == "rate_limited"
        assert ctl.calls() == 2
        assert bench.engine.breaker("web@default").count == 0


async def test_a_401_on_a_credential_that_has_worked_pauses_its_tools_until_mark_fixed(
    upstream: Upstream,
) -> None:
    url, ctl = upstream
    async with proxied({"web": web(url)}, proxy_table=ANNOTATED) as bench:
        assert not (await bench.call("web__lookup", {"query": "q"})).is_error
        ctl.set_mode("http_401")
        revoked = await bench.call("web__lookup", {"query": "q"})
        assert revoked.structured_content["status"] == "credential_revoked"
        for _ in range(3):
            again = await bench.call("web__charge", {"amount": 1})
            assert again.structured_content["status"] == "credential_revoked"
        assert ctl.calls() == 2
        listed = (await bench.host.list_tools()).tools
        assert all(
            t.description.startswith("Unavailable: its credential was revoked") for t in listed
        )
        ctl.set_mode("ok")
        bench.proxy.breakers.restore_credential("web@default", "ops")
        assert not (await bench.call("web__lookup", {"query": "q"})).is_error
        assert ctl.calls() == 3


async def test_a_401_on_a_credential_that_never_worked_is_the_callers_to_fix(
    upstream: Upstream,
) -> None:
    url, ctl = upstream
    async with proxied({"web": web(url)}) as bench:
        ctl.set_mode("http_401")
        result = await bench.call("web__lookup", {"query": "q"})
        assert result.structured_content["status"] == "invalid_request"
        assert "never worked" in result.structured_content["error"]
        assert not bench.engine.credential_paused("web@default")


async def test_an_expired_session_is_started_again_once_and_the_call_resent(
    upstream: Upstream,
) -> None:
    url, ctl = upstream
    async with proxied({"web": web(url, attempts=1)}, upstream_mode="legacy") as bench:
        ctl.set_mode("http_404_session")
        result = await bench.call("web__charge", {"amount": 1})
        assert not result.is_error
        assert ctl.calls() == 2
        assert bench.engine.breaker("web@default").count == 0


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_host_over_streamable_http_needs_the_bearer_token(
    upstream: Upstream, mode: str
) -> None:
    upstream_url, ctl = upstream
    token = "t" * 32
    async with proxied({"web": web(upstream_url)}) as bench:
        port = free_port()
        config = uvicorn.Config(
            host_app(bench.proxy, token, "127.0.0.1"),
            host="127.0.0.1",
            port=port,
            lifespan="on",
            log_level="warning",
        )
        server = uvicorn.Server(config)
        async with anyio.create_task_group() as group:
            group.start_soon(server.serve)
            with anyio.fail_after(10):
                while not server.started:
                    await anyio.sleep(0.02)
            url = f"http://127.0.0.1:{port}/mcp"
            async with httpx2.AsyncClient() as anonymous:
                refused = await anonymous.post(
                    url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
                )
            assert refused.status_code == 401
            headers = {"Authorization": f"Bearer {token}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=30) as http,
                Client(streamable_http_client(url, http_client=http), mode=mode) as host,
            ):
                names = {t.name for t in (await host.list_tools()).tools}
                assert names == {"web__lookup", "web__charge"}
                result = await host.call_tool("web__lookup", {"query": "q"})
                assert not result.is_error
            server.should_exit = True
    assert ctl.calls() == 1
