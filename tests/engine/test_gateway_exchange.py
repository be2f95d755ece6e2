"""The agent exchange's rules as the in-process gateway runs them: the ones the ASGI gateway's
tests prove on aiohttp hold on httpx too, because both run `engine.exchange`."""

import httpx
import pytest

from breakerdeck.engine import events as ev
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.gateway import Gateway
from breakerdeck.engine.policy import AgentPolicy
from breakerdeck.fixtures.platform import FakePlatform, FakeVault

AGENT = "ava"


class SameTokenBack(FakePlatform):
    """A revoked credential whose refresh answers 200 with the very token just rejected."""

    def __init__(self, name: str, vault_token: str) -> None:
        super().__init__(name)
        self.credential_valid = False
        self.vault_token = vault_token

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        if request.url.path.endswith("/oauth/token"):
            return httpx.Response(200, json={"access_token": self.vault_token})
        return response


@pytest.fixture
def engine(loop_clock):
    engine = Engine(AgentPolicy(), clock=loop_clock)
    yield engine
    engine.close()


@pytest.fixture
def lines(engine):
    seen = []
    engine.subscribe(seen.append)
    return seen


async def test_a_refresh_that_returns_the_rejected_credential_sends_no_retry(engine, lines):
    vault = FakeVault()
    platform = SameTokenBack("payments", await vault.fetch(AGENT, "payments"))
    client = httpx.AsyncClient(transport=platform, base_url="https://payments.test")
    gateway = Gateway(engine, {"payments": client}, vault)

    response = await gateway.call(AGENT, "payments", path="/charges", json={"amount": 5})

    assert response.status == 401 and response.body["error"] == "reauth_failed"
    assert (platform.requests, platform.refreshes) == (1, 1)
    (line,) = [e for e in lines if e.type == ev.CALL_COMPLETED]
    assert (line.fields["refresh"], line.fields["attempts"]) == ("failed", 1)
    assert (line.fields["outcome"], line.fields["counted"]) == ("auth_failure", True)
