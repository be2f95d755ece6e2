"""A client of the live feed: decoded messages, reconnects with backoff, resyncs from snapshots.

`FeedClient` is what the console's watch screen reads from; `fetch_snapshot` and
`send_request` are one-shot helpers for `breakerdeck status` and `breakerdeck reset`.

    client = FeedClient("ws://127.0.0.1:8765", token_file="~/.local/state/breakerdeck/viewer.token")
    async for message in client:
        match message:
            case SnapshotMessage(): ...      # replace everything known about this source
            case EventMessage() | EventsMessage(): ...   # apply, in order
            case ConnectionLost(): ...       # mark this source stale; the client reconnects
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI

from breakerdeck.engine.errors import StateDirError
from breakerdeck.engine.feed import protocol as p
from breakerdeck.engine.storage import statedir
from breakerdeck.engine.text import printable

log = logging.getLogger(__name__)

#: Snapshots of big engines are large; a client accepts far more than it may send.
CLIENT_MAX_SIZE = 64 * 1024 * 1024

#: The operator writes `FeedClient.request` sends, by their wire `type`.
_REQUESTS: dict[str, type[p.ClientRequest]] = {
    "reset": p.ResetRequest,
    "mark_fixed": p.MarkFixedRequest,
    "hold": p.HoldRequest,
    "release": p.ReleaseRequest,
    "mode": p.ModeRequest,
}

Message = p.SnapshotMessage | p.EventMessage | p.EventsMessage | p.AckMessage | p.ErrorMessage


class FeedError(Exception):
    """The feed could not be used; subclasses say why."""


class FeedUnreachable(FeedError):
    """Nothing answered, or the connection broke, or the server did not speak websocket."""


class FeedRefused(FeedError):
    """The server refused the token (HTTP 401 or 403 at the handshake)."""


class FeedProtocolError(FeedError):
    """The server sent something this client does not understand (e.g. another version)."""


class FeedRequestError(FeedError):
    """The server answered a request with an `error` frame."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class ConnectionLost:
    """Not a wire message: the connection is gone (or never came up); the client retries.

    A console marks the source's cards stale from `since` (wall time) until the next snapshot.
    """

    error: str
    since: float
    attempt: int
    retry_in: float


def read_token(path: str | Path) -> str:
    """A token file's content, surrounding whitespace stripped.

    The file is read as the state dir's private files are (engine.storage.statedir.read_private): a
    symlink is not followed, and a file owned by another user or writable by others is
    refused, since whoever could plant or change it would choose the token we present. Every
    refusal is a `FeedError` naming the file, as an empty file is.
    """
    where = Path(path).expanduser()
    try:
        token = statedir.read_private(where).strip()
    except StateDirError as error:
        raise FeedError(f"cannot use token file: {error}") from None
    if not token:
        raise FeedError(f"token file {where} is empty")
    return token


def _headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _connect(url: str, token: str, open_timeout: float, max_size: int | None) -> connect:
    return connect(
        url,
        additional_headers=_headers(token),
        open_timeout=open_timeout,
        max_size=max_size,
        compression=None,
    )


def _translate(error: BaseException, url: str) -> FeedError:
    if isinstance(error, InvalidStatus):
        status = error.response.status_code
        if status in (401, 403):
            return FeedRefused(f"{url} refused the token (HTTP {status})")
        said = _body(error.response.body)
        if status == 503:
            return FeedUnreachable(f"{url} is busy (HTTP 503){said}")
        return FeedUnreachable(f"{url} answered HTTP {status}, not a websocket{said}")
    if isinstance(error, InvalidURI):
        return FeedError(f"not a websocket URL: {url} (expected ws://host:port)")
    if isinstance(error, TimeoutError | asyncio.TimeoutError):
        return FeedUnreachable(f"{url} did not answer in time")
    if isinstance(error, ConnectionClosed):
        return FeedUnreachable(f"{url} closed the connection ({error})")
    if isinstance(error, OSError | InvalidHandshake | EOFError):
        return FeedUnreachable(f"cannot reach {url}: {error}")
    return FeedUnreachable(f"{url}: {error}")


def _body(body: bytes | bytearray | None) -> str:
    """What a refusing server said, short and escaped (it is shown on a terminal)."""
    text = (body or b"").decode("utf-8", "replace").strip()
    return f": {printable(text[:200])}" if text else ""


class FeedClient:
    """One source's feed, as an async iterator of validated messages that survives outages.

    - The first message after every (re)connect is a `SnapshotMessage`: state is replaced, not
      merged. Events with `seq` at or below the latest snapshot's are dropped here, so nothing
      is applied twice.
    - On a lost connection it yields a `ConnectionLost` and retries with exponential backoff
      (with jitter) between `min_backoff` and `max_backoff` seconds.
    - A refused token (`FeedRefused`) or another protocol version (`FeedProtocolError`) ends the
      iteration with that exception: retrying cannot fix them. With `token_file`, the file is
      read again on every connect, so a server that regenerated its tokens is picked up.
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        token_file: str | Path | None = None,
        min_backoff: float = 0.5,
        max_backoff: float = 30.0,
        open_timeout: float = 10.0,
        max_size: int | None = CLIENT_MAX_SIZE,
    ) -> None:
        if token is None and token_file is None:
            raise ValueError("FeedClient needs a token or a token_file")
        self.url = url
        self._token = token
        self._token_file = token_file
        self.min_backoff = min_backoff
        self.max_backoff = max_backoff
        self.open_timeout = open_timeout
        self.max_size = max_size
        self.snapshot_seq: int | None = None
        self.last_seq: int | None = None
        self._ws: ClientConnection | None = None
        self._pending: dict[str | int, asyncio.Future[p.AckMessage]] = {}
        self._ids = itertools.count(1)
        self._closed = False

    @property
    def connected(self) -> bool:
        return self._ws is not None and self.snapshot_seq is not None

    def token(self) -> str:
        if self._token_file is not None:
            return read_token(self._token_file)
        assert self._token is not None
        return self._token

    def __aiter__(self) -> AsyncIterator[Message | ConnectionLost]:
        return self.messages()

    async def messages(self) -> AsyncIterator[Message | ConnectionLost]:
        attempt = 0
        while not self._closed:
            try:
                async with _connect(self.url, self.token(), self.open_timeout, self.max_size) as ws:
                    self._ws = ws
                    attempt = 0
                    async for raw in ws:
                        message = self._accept(raw)
                        if message is not None:
                            yield message
                error = f"{self.url} closed the connection (code {ws.close_code})"
            except p.ProtocolError as bad:
                if bad.code == p.UNSUPPORTED_VERSION:
                    raise FeedProtocolError(f"{self.url}: {bad.message}") from None
                error = f"{self.url} sent a bad frame: {bad.message}"
                log.warning("feed client: %s; reconnecting", error)
            except (OSError, TimeoutError, InvalidHandshake, ConnectionClosed, EOFError) as exc:
                translated = _translate(exc, self.url)
                if isinstance(translated, FeedRefused):
                    raise translated from None
                if not isinstance(translated, FeedUnreachable):
                    raise translated from exc
                error = str(translated)
            finally:
                self._ws = None
                self.snapshot_seq = None
                self._fail_pending("the connection to the feed was lost")
            if self._closed:
                return
            attempt += 1
            delay = min(self.max_backoff, self.min_backoff * 2 ** (attempt - 1))
            delay *= random.uniform(0.5, 1.0)
            yield ConnectionLost(error, time.time(), attempt, round(delay, 3))
            await asyncio.sleep(delay)

    def _accept(self, raw: str | bytes) -> Message | None:
        message = p.parse_server_message(raw)
        if isinstance(message, p.SnapshotMessage):
            self.snapshot_seq = self.last_seq = message.seq
            return message
        if isinstance(message, p.EventMessage):
            if self.last_seq is not None and message.seq <= self.last_seq:
                return None
            self.last_seq = message.seq
            return message
        if isinstance(message, p.EventsMessage):
            floor = self.last_seq if self.last_seq is not None else -1
            fresh = [event for event in message.events if event.seq > floor]
            if not fresh:
                return None
            self.last_seq = fresh[-1].seq
            if len(fresh) != len(message.events):
                return p.EventsMessage(seq=fresh[-1].seq, events=fresh)
            return message
        future = self._pending.pop(message.request_id, None) if message.request_id else None
        if future is not None and not future.done():
            if isinstance(message, p.AckMessage):
                future.set_result(message)
            else:
                future.set_exception(FeedRequestError(message.code, message.message))
        return message

    async def request(
        self,
        kind: str,
        key: str,
        *,
        reason: str = "",
        actor: str | None = None,
        timeout: float = 10.0,
        **fields: object,
    ) -> p.AckMessage:
        """Send an operator write (`reset`, `mark_fixed`, `hold`, `release`, `mode`; `fields`:
        its own, e.g. `duration="30m"`, `close=True`, `mode="shadow"`) on the current
        connection and wait for its answer.

        Needs `messages()` to be running (it reads the answer). Raises `FeedRequestError` for
        an `error` answer, or for a request this client cannot send as given (code
        `invalid_message`, nothing sent), and `FeedUnreachable` when not connected or the
        answer never came.
        """
        if self._ws is None:
            raise FeedUnreachable(f"not connected to {self.url}")
        rid = f"r{next(self._ids)}"
        model = _REQUESTS.get(kind)
        if model is None:
            raise ValueError(f"not an operator write: {kind!r}")
        try:
            message = model.model_validate(
                {"key": key, "request_id": rid, "reason": reason, "actor": actor, **fields}
            )
        except ValidationError as error:
            said = "; ".join(problem["msg"] for problem in error.errors())
            raise FeedRequestError(p.INVALID, f"invalid {kind} message: {said}") from None
        future: asyncio.Future[p.AckMessage] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        try:
            await self._ws.send(message.model_dump_json(exclude_none=True))
            return await asyncio.wait_for(future, timeout)
        except (ConnectionClosed, TimeoutError) as error:
            raise FeedUnreachable(f"no answer from {self.url}: {error}") from None
        finally:
            self._pending.pop(rid, None)

    async def reset(self, key: str, reason: str = "", actor: str | None = None) -> p.AckMessage:
        return await self.request("reset", key, reason=reason, actor=actor)

    async def mark_fixed(
        self, key: str, reason: str = "", actor: str | None = None
    ) -> p.AckMessage:
        return await self.request("mark_fixed", key, reason=reason, actor=actor)

    def _fail_pending(self, why: str) -> None:
        for future in self._pending.values():
            if not future.done():
                future.set_exception(FeedUnreachable(why))
        self._pending.clear()

    async def close(self) -> None:
        self._closed = True
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.close()


# -- one-shot helpers ---------------------------------------------------------------------------


async def fetch_snapshot(url: str, token: str, *, timeout: float = 10.0) -> p.SnapshotMessage:
    """Connect, read the snapshot, hang up."""
    try:
        async with asyncio.timeout(timeout):
            async with _connect(url, token, timeout, CLIENT_MAX_SIZE) as ws:
                message = p.parse_server_message(await ws.recv())
    except p.ProtocolError as bad:
        raise FeedProtocolError(f"{url}: {bad.message}") from None
    except (OSError, TimeoutError, InvalidHandshake, ConnectionClosed, EOFError) as error:
        raise _translate(error, url) from None
    if not isinstance(message, p.SnapshotMessage):
        raise FeedProtocolError(f"{url} sent {message.type} before its snapshot")
    return message


async def send_request(
    url: str,
    token: str,
    request: p.ClientRequest,
    *,
    timeout: float = 10.0,
) -> tuple[p.SnapshotMessage, p.AckMessage]:
    """Connect, send one request, wait for its answer; the snapshot read on the way comes back
    too. Raises `FeedRequestError` when the server answers with an error."""
    snapshot: p.SnapshotMessage | None = None
    try:
        async with asyncio.timeout(timeout):
            async with _connect(url, token, timeout, CLIENT_MAX_SIZE) as ws:
                await ws.send(request.model_dump_json(exclude_none=True))
                async for raw in ws:
                    message: Any = p.parse_server_message(raw)
                    if isinstance(message, p.SnapshotMessage):
                        snapshot = message
                    elif isinstance(message, p.AckMessage | p.ErrorMessage):
                        if message.request_id != request.request_id:
                            continue
                        if isinstance(message, p.ErrorMessage):
                            raise FeedRequestError(message.code, message.message)
                        assert snapshot is not None
                        return snapshot, message
    except p.ProtocolError as bad:
        raise FeedProtocolError(f"{url}: {bad.message}") from None
    except (OSError, TimeoutError, InvalidHandshake, ConnectionClosed, EOFError) as error:
        raise _translate(error, url) from None
    raise FeedUnreachable(f"{url} closed the connection before answering")
