"""A platform that records what reached it at the wire, and misbehaves on request.

HTTP/1.1 with keep-alive on an asyncio server in the test's loop. Every request is recorded
(target, headers, body size) before it is answered. Paths pick the answer:
- `/sse/<n>`: a text/event-stream of n events, each sent when the test releases it (`gate`);
- `/flood`: a chunked body that never ends, sent as fast as the reader takes it;
- `/delay/<seconds>`: 200 after that many real seconds;
- `/slow-small`: a 6-byte body of known length, its second half sent when `gate` releases it;
- `/redirect`: a 302 to another host;
- `/garbage`: bytes that are not HTTP;
- `/midbody`: a head promising 100 bytes, 10 of them, then a closed connection;
- `/status/<code>`: that status with a JSON body;
- anything else: 200 with a JSON echo of the request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable
from dataclasses import dataclass, field


@dataclass
class Seen:
    method: str
    target: str
    headers: list[tuple[str, str]]
    body_bytes: int

    def header(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name.lower()]


@dataclass
class Recorder:
    seen: list[Seen] = field(default_factory=list)
    gate: asyncio.Queue[None] = field(default_factory=asyncio.Queue)
    server: asyncio.Server | None = None
    #: Connections that have ended, and how many of them the gateway ended mid-answer.
    ended: int = 0
    cut: int = 0

    async def wait_cut(self, count: int, within: float) -> None:
        """Until `count` answers have been cut by their reader (bounded, never forever)."""
        async with asyncio.timeout(within):
            while self.cut < count:
                await asyncio.sleep(0.01)

    @property
    def port(self) -> int:
        assert self.server is not None
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def start(self) -> Recorder:
        self.server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        return self

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except _Cut:
            self.cut += 1
        finally:
            self.ended += 1
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = [tuple(part.strip() for part in line.split(":", 1)) for line in lines[1:] if line]
        seen = Seen(method, target, headers, 0)  # type: ignore[arg-type]
        seen.body_bytes = await _read_body(reader, seen)
        self.seen.append(seen)
        path = target.split("?", 1)[0]
        if path.endswith("/garbage"):
            writer.write(b"this is not HTTP at all\r\n\r\n")
            await writer.drain()
            return False
        if path.endswith("/midbody"):
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
            await writer.drain()
            return False
        if "/sse/" in path:
            await self._sse(reader, writer, int(path.rsplit("/", 1)[1]))
            return True
        if path.endswith("/flood"):
            await _flood(writer)
        if path.endswith("/slow-small"):
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nabc")
            await writer.drain()
            await _until(reader, self.gate.get())
            writer.write(b"def")
            await writer.drain()
            return True
        if "/delay/" in path:
            await asyncio.sleep(float(path.rsplit("/", 1)[1]))
        if path.endswith("/redirect"):
            _reply(writer, 302, {"moved": True}, [("Location", "http://evil.invalid/steal")])
        elif "/status/" in path:
            _reply(writer, int(path.rsplit("/", 1)[1]), {"status": "as asked"})
        else:
            _reply(writer, 200, {"target": target, "method": method})
        await writer.drain()
        return True

    async def _sse(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, events: int
    ) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        for number in range(events):
            await _until(reader, self.gate.get())
            event = b"data: event %d\n\n" % number
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()


class _Cut(Exception):
    """The reader closed the connection while its answer was still being sent."""


async def _until(reader: asyncio.StreamReader, step: Awaitable[None]) -> None:
    """Wait for `step` (the test's gate), or raise `_Cut` as soon as the reader hangs up:
    a stream waiting for its next event still notices that nobody is there."""
    waiting = asyncio.ensure_future(step)
    hangup = asyncio.ensure_future(reader.read(1))
    done, _ = await asyncio.wait({waiting, hangup}, return_when=asyncio.FIRST_COMPLETED)
    if waiting in done:
        hangup.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await hangup  # gone before the next request is read
        return
    waiting.cancel()
    raise _Cut


async def _flood(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"x" * 65_536
    try:
        while True:
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            await writer.drain()
    except ConnectionError:
        raise _Cut from None


async def _read_body(reader: asyncio.StreamReader, seen: Seen) -> int:
    length = seen.header("content-length")
    if length:
        total = int(length[0])
        remaining = total
        while remaining:
            remaining -= len(await reader.readexactly(min(remaining, 1 << 20)))
        return total
    if "chunked" in ",".join(seen.header("transfer-encoding")).lower():
        total = 0
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip(), 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                return total
            total += len(await reader.readexactly(size))
            await reader.readexactly(2)
    return 0


def _reply(
    writer: asyncio.StreamWriter,
    status: int,
    body: dict[str, object],
    extra: list[tuple[str, str]] | None = None,
) -> None:
    content = json.dumps(body).encode()
    lines = [f"HTTP/1.1 {status} X", "Content-Type: application/json"]
    lines += [f"Content-Length: {len(content)}", "Connection: keep-alive, X-Hop"]
    lines += ["X-Hop: should not pass", "Keep-Alive: timeout=5"]
    lines += [f"{k}: {v}" for k, v in extra or []]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + content)
