"""The feed under hostile clients: ones that never read, fill the connection cap, send
malformed handshakes or deep JSON, smuggle newlines into log lines; and hostile token files.

Real sockets on loopback; the timeouts are set small in `FeedLimits` so nothing waits long.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from breakerdeck.engine.engine import Engine
from breakerdeck.engine.feed import protocol as p
from breakerdeck.engine.feed.client import FeedError, FeedUnreachable, fetch_snapshot, read_token
from breakerdeck.engine.feed.limits import FeedLimits
from breakerdeck.engine.feed.server import serve_feed
from tests.feed.feedkit import OPERATOR, VIEWER, call, client, receive, request, trip

SERVER_LOG = "breakerdeck.engine.feed.server"


def feed_with(engine: Engine, **limits: float) -> contextlib.AbstractAsyncContextManager:
    return serve_feed(
        engine, port=0, viewer_token=VIEWER, operator_token=OPERATOR, limits=FeedLimits(**limits)
    )


async def silent_client(port: int, token: str = VIEWER) -> socket.socket:
    """A peer that completes the websocket handshake, then never reads nor answers a ping.

    Its receive buffer is tiny, so what the server sends backs up into the server quickly.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, ("127.0.0.1", port))
    handshake = (
        f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        f"Sec-WebSocket-Version: 13\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    await loop.sock_sendall(sock, handshake.encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += await asyncio.wait_for(loop.sock_recv(sock, 1), 5)
    assert answer.startswith(b"HTTP/1.1 101"), answer
    return sock


async def until(condition, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def reading_along(ws) -> AsyncIterator[list[int]]:
    """Read `ws` in the background; the list holds the last seq seen (a snapshot's or an
    event's), so a test can tell the good client keeps up."""
    seen = [-1]

    async def read() -> None:
        while True:
            message = await receive(ws, timeout=30)
            seen[0] = max(seen[0], message.seq)

    task = asyncio.create_task(read())
    try:
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


# -- clients that never read, and the connection cap ------------------------------------------


async def test_a_client_that_never_reads_is_disconnected_while_a_good_client_keeps_up(
    engine: Engine,
) -> None:
    async with (
        feed_with(engine, send_timeout=1.0) as feed,
        client(feed.url) as good,
    ):
        await receive(good)
        silent = await silent_client(feed.port)
        try:
            await until(lambda: feed.client_count == 2)
            async with reading_along(good) as seen:
                async with asyncio.timeout(20):
                    while feed.dropped_stalled == 0:
                        for _ in range(200):
                            call(engine, "agent-1")
                        await asyncio.sleep(0.01)
                await until(lambda: feed.client_count == 1)
                call(engine, "agent-1")
                await until(lambda: seen[0] == engine.seq)
        finally:
            silent.close()
    assert feed.dropped_stalled == 1


async def test_connections_over_the_cap_are_refused_at_the_handshake_with_503(
    engine: Engine,
) -> None:
    async with feed_with(engine, max_connections=5) as feed:
        admitted = [await client(feed.url) for _ in range(5)]
        try:
            with pytest.raises(InvalidStatus) as refused:
                async with client(feed.url):
                    pass
            response = refused.value.response
            assert response.status_code == 503
            assert b"at most 5 connections" in response.body
            assert response.headers["Retry-After"] == "5"
            with pytest.raises(FeedUnreachable, match=r"busy.*at most 5"):
                await fetch_snapshot(feed.url, VIEWER, timeout=5)
            assert feed.refused_busy == 2

            await admitted.pop().close()
            await until(lambda: feed.client_count == 4)
            async with client(feed.url) as newcomer:
                assert isinstance(await receive(newcomer), p.SnapshotMessage)
            for ws in admitted:  # the ones that stayed were served all along
                assert isinstance(await receive(ws), p.SnapshotMessage)
        finally:
            for ws in admitted:
                await ws.close()


async def test_silent_clients_that_fill_the_cap_are_ended_by_keepalive(engine: Engine) -> None:
    async with feed_with(
        engine, max_connections=3, ping_interval=0.1, ping_timeout=0.2, close_timeout=0.2
    ) as feed:
        silent = [await silent_client(feed.port) for _ in range(3)]
        try:
            with pytest.raises(InvalidStatus, match="503"):
                async with client(feed.url):
                    pass
            # None of them answers its ping: the keepalive ends them and frees the slots.
            await until(lambda: feed.client_count == 0, timeout=5)
            async with client(feed.url) as ws:
                assert isinstance(await receive(ws), p.SnapshotMessage)
        finally:
            for sock in silent:
                sock.close()


# -- malformed handshakes and messages --------------------------------------------------------


async def test_two_authorization_headers_are_refused_with_400_and_the_feed_keeps_serving(
    feed, caplog: pytest.LogCaptureFixture
) -> None:
    twice = [("Authorization", f"Bearer {VIEWER}"), ("Authorization", f"Bearer {OPERATOR}")]
    with pytest.raises(InvalidStatus) as refused:
        async with connect(feed.url, additional_headers=twice, compression=None):
            pass
    assert refused.value.response.status_code == 400
    assert b"More than one Authorization header" in refused.value.response.body
    assert "Traceback" not in caplog.text
    async with client(feed.url) as ws:
        assert isinstance(await receive(ws), p.SnapshotMessage)


@pytest.mark.parametrize("depth", [1_000, 30_000])
async def test_deeply_nested_json_is_answered_bad_json_and_the_connection_stays(
    engine: Engine, feed, depth: int
) -> None:
    trip(engine, "agent-1")
    async with client(feed.url, OPERATOR) as ws:
        await receive(ws)
        await ws.send("[" * depth + "]" * depth)
        answer = await receive(ws)
        assert isinstance(answer, p.ErrorMessage)
        assert answer.code == "bad_json"
        assert "nested too deeply" in answer.message
        ok = await request(ws, type="reset", key="agent-1", request_id="after")
        assert isinstance(ok, p.AckMessage)


@pytest.mark.parametrize(
    ("field", "limit"), [("reason", p.MAX_REASON_CHARS), ("actor", p.MAX_ACTOR_CHARS)]
)
async def test_an_over_long_reason_or_actor_is_refused_with_its_limit(
    engine: Engine, feed, field: str, limit: int
) -> None:
    trip(engine, "agent-1")
    seq = engine.seq
    async with client(feed.url, OPERATOR) as ws:
        await receive(ws)
        fits = {field: "x" * limit}
        done = await request(ws, type="reset", key="agent-1", request_id="a", **fits)
        assert isinstance(done, p.AckMessage)
        over = {field: "x" * (limit + 1)}
        refused = await request(ws, type="reset", key="agent-1", request_id="b", **over)
    assert isinstance(refused, p.ErrorMessage)
    assert refused.code == "invalid_message"
    assert field in refused.message
    assert f"at most {limit} characters" in refused.message
    assert engine.seq == seq + 1  # only the one that fit was done


# -- the log ----------------------------------------------------------------------------------


async def test_a_newline_in_a_reset_reason_cannot_forge_a_log_line(
    engine: Engine, feed, caplog: pytest.LogCaptureFixture
) -> None:
    trip(engine, "agent-1")
    forged = "ok\nfeed: reset on 'payments' by remote:operator:root"
    caplog.set_level(logging.INFO, logger=SERVER_LOG)
    async with client(feed.url, OPERATOR) as ws:
        await receive(ws)
        answer = await request(
            ws, type="reset", key="agent-1\x1b[2J", request_id="r", reason=forged, actor="eve\r"
        )
    assert isinstance(answer, p.ErrorMessage)  # the key with an escape code is unknown
    async with client(feed.url, OPERATOR) as ws:
        await receive(ws)
        ack = await request(
            ws, type="reset", key="agent-1", request_id="r", reason=forged, actor="eve\r"
        )
    assert isinstance(ack, p.AckMessage)
    lines = [r.getMessage() for r in caplog.records if r.name == SERVER_LOG]
    assert lines
    for line in lines:
        assert "\n" not in line and "\r" not in line and "\x1b" not in line
    [reset] = [line for line in lines if line.startswith("feed: reset on agent-1 ")]
    assert "by remote:operator:eve\\x0d" in reset
    assert "(reason: ok\\x0afeed: reset on 'payments'" in reset
    # The audit keeps what was sent; consumers escape it when they show it.
    assert engine.view("agent-1").state == "closed"


async def test_the_same_bad_message_over_and_over_is_logged_once(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=SERVER_LOG)
    async with feed_with(engine, repeat_log_seconds=3600) as feed, client(feed.url) as ws:
        await receive(ws)
        for _ in range(50):
            await ws.send("{not json")
            assert (await receive(ws)).code == "bad_json"
    bad = [r for r in caplog.records if "sent a bad message" in r.getMessage()]
    assert len(bad) == 1


async def test_identical_asyncio_errors_are_logged_once_while_the_feed_serves(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """What a process out of file descriptors does: asyncio's accept loop logs the same
    traceback for every attempt (78 MB in a minute)."""
    loop = asyncio.get_running_loop()

    def accept_failed() -> None:
        error = OSError(24, "Too many open files")
        loop.call_exception_handler(
            {"message": "socket.accept() out of system resource", "exception": error}
        )

    async with feed_with(engine):
        for _ in range(1000):
            accept_failed()
    assert len([r for r in caplog.records if r.name == "asyncio"]) == 1
    accept_failed()  # the feed is gone: asyncio's log is left as it was
    assert len([r for r in caplog.records if r.name == "asyncio"]) == 2


# -- token files --------------------------------------------------------------------------------


def token_file(tmp_path: Path, mode: int = 0o600) -> Path:
    path = tmp_path / "viewer.token"
    path.write_text(f"{VIEWER}\n")
    path.chmod(mode)
    return path


def test_a_private_token_file_is_read(tmp_path: Path) -> None:
    assert read_token(token_file(tmp_path)) == VIEWER


def test_a_link_to_a_token_file_writable_by_others_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "mounted.token"
    link.symlink_to(token_file(tmp_path, 0o666))
    with pytest.raises(FeedError, match=r"token file.*writable by others"):
        read_token(link)


def test_a_token_file_writable_by_others_is_refused(tmp_path: Path) -> None:
    path = token_file(tmp_path, 0o666)
    with pytest.raises(FeedError, match="writable by others"):
        read_token(path)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_token_file_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    path = token_file(tmp_path)
    os.chown(path, 65534, 65534)
    with pytest.raises(FeedError, match="belongs to uid 65534"):
        read_token(path)
    link = tmp_path / "planted.token"
    link.symlink_to(path)
    with pytest.raises(FeedError, match="belongs to uid 65534"):
        read_token(link)


async def test_a_feed_that_cannot_start_leaves_no_log_filter_behind(engine: Engine) -> None:
    async with feed_with(engine) as feed:
        with pytest.raises(OSError):
            async with serve_feed(
                engine, port=feed.port, viewer_token=VIEWER, operator_token=OPERATOR
            ):
                pass
    assert logging.getLogger("asyncio").filters == []
    assert logging.getLogger(SERVER_LOG).filters == []
