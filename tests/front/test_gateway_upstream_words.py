"""A 502 tells the agent what happened to its call in the gateway's own words, naming the
platform as the agent knows it, and never where the platform lives: no host, no port, no IP,
no file or command of the vault (docs/gateway.md, "Policy answers")."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.front.conftest import StartRig, body, credential_file, free_socket, write_config

_IP = re.compile(r"\d{1,3}(\.\d{1,3}){3}|::1|\[")


def _assert_names_only_the_platform(text: str, port: int, *hidden: str) -> None:
    assert "payments" in text
    assert not _IP.search(text), text
    assert str(port) not in text, text
    assert "localhost" not in text, text
    for each in hidden:
        assert each not in text, text


@pytest.fixture
async def plain_listener() -> AsyncIterator[int]:
    """A loopback socket that answers every connection with a line of plain text: not TLS."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    sock = free_socket()
    server = await asyncio.start_server(answer, sock=sock)
    yield sock.getsockname()[1]
    server.close()
    await server.wait_closed()


async def _charge(
    tmp_path: Path, start_gateway: StartRig, base_url: str, credential: str | None = None
) -> httpx.Response:
    """One agent's call to `payments` at `base_url`, with a stored credential unless given."""
    entry = credential or credential_file(tmp_path)
    config = write_config(tmp_path, {"payments": base_url}, {"billing": {"payments": entry}})
    rig = await start_gateway(config)
    answer: httpx.Response = await rig.call("billing", "/p/payments/v1/charges")
    return answer


async def test_a_closed_port_is_a_502_that_names_no_host_or_port(
    tmp_path: Path, start_gateway: StartRig
) -> None:
    closed = free_socket()  # bound, never listening: a connect is refused
    port = closed.getsockname()[1]
    answer = await _charge(tmp_path, start_gateway, f"http://127.0.0.1:{port}/api")
    closed.close()
    assert answer.status_code == 502
    message = body(answer)["message"]
    assert message == "could not connect to payments: the connection was refused"
    _assert_names_only_the_platform(answer.text, port, "Connect call")


async def test_a_tls_handshake_with_a_plain_socket_is_a_502_that_names_no_host_or_port(
    tmp_path: Path, start_gateway: StartRig, plain_listener: int
) -> None:
    answer = await _charge(tmp_path, start_gateway, f"https://127.0.0.1:{plain_listener}/api")
    assert answer.status_code == 502
    assert body(answer)["message"] == "the TLS handshake with payments failed"
    _assert_names_only_the_platform(answer.text, plain_listener, "SSL", "ssl")


async def test_a_failing_vault_command_is_a_502_that_names_no_command_or_file(
    tmp_path: Path, start_gateway: StartRig, plain_listener: int
) -> None:
    vault = tmp_path / "secret-vault-cli"
    vault.write_text("#!/bin/sh\necho 'no session for vault.internal:8200' >&2\nexit 3\n")
    vault.chmod(0o700)
    credential = f'{{ command = ["{vault}", "read", "payments"] }}'
    answer = await _charge(
        tmp_path, start_gateway, f"http://127.0.0.1:{plain_listener}/api", credential
    )
    assert answer.status_code == 502
    assert body(answer)["message"] == "the credential vault is unreachable for payments"
    _assert_names_only_the_platform(answer.text, plain_listener, "secret-vault-cli", str(tmp_path))
