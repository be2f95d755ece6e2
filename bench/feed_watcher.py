"""The watchers of the feed bench, run as a separate process by bench/feed.py.

    python bench/feed_watcher.py URL TOKEN COUNT

Opens COUNT websocket connections (the `websockets` client, as `FeedClient` uses it, no
compression) and reads every frame as bytes. Each frame's envelope is checked:

- `snapshot` (json-parsed; small): the next event expected is its `seq` + 1; a snapshot after
  the first is a resync.
- `event` / `events`: the frame's `seq` is its last event's, the first event's `seq` is the one
  expected (no gap, nothing twice), and the frame holds exactly last - first + 1 events (the
  engine numbers its events without holes, so that means strictly increasing). Events are
  counted by their `{"seq":` openings (the record's first key), not json-parsed: one process
  reads for all watchers, and parsing 200,000 events/s would measure the watcher, not the feed.
  Every 64th frame is json-parsed in full and checked event by event as well.

Protocol with the parent, one line each: it prints `ready` once every connection has its first
snapshot; it reads `stop LAST_SEQ` on standard input, waits (at most 10 s) until every
connection has received LAST_SEQ, then prints one JSON line (this process's CPU seconds per
wall second from `ready` to the end, and per watcher the frames as (receive wall time, first
seq, last seq), the snapshots and the envelope errors) and exits.
Everything stops by itself: a lost connection or a missing `stop` within 120 s ends the run.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from dataclasses import dataclass, field

from websockets.asyncio.client import connect

HEAD = re.compile(rb'\{"type":"(events?|snapshot)"')
FRAME_SEQ = re.compile(rb'"seq":(\d+)')
OPENING = b'{"seq":'
FULL_CHECK_EVERY = 64
DEADLINE_SECONDS = 120.0


@dataclass
class Watcher:
    frames: list[tuple[float, int, int]] = field(default_factory=list)
    snapshots: int = 0
    expected: int = -1
    last: int = -1
    errors: list[str] = field(default_factory=list)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False

    def error(self, text: str) -> None:
        if len(self.errors) < 20:
            self.errors.append(text)

    def take(self, raw: bytes, now: float) -> None:
        head = HEAD.match(raw)
        if head is None:
            self.error(f"no type at the head of {raw[:60]!r}")
            return
        kind = head.group(1)
        if kind == b"snapshot":
            message = json.loads(raw)
            if message.get("version") != 1:
                self.error(f"snapshot version {message.get('version')!r}")
            self.snapshots += 1
            self.expected = message["seq"] + 1
            self.last = message["seq"]
            self.ready.set()
            return
        if not self.snapshots:
            self.error("an event frame before the first snapshot")
        seq = FRAME_SEQ.search(raw, head.end())
        first = FRAME_SEQ.search(raw, raw.find(OPENING))
        if seq is None or first is None:
            self.error(f"no seq in {raw[:80]!r}")
            return
        last, first_seq = int(seq.group(1)), int(first.group(1))
        count = raw.count(OPENING)
        if kind == b"event" and count != 1:
            self.error(f"an event frame with {count} events")
        if first_seq != self.expected:
            self.error(f"gap or repeat: expected seq {self.expected}, got {first_seq}")
        if last - first_seq + 1 != count:
            self.error(f"frame {first_seq}..{last} holds {count} events")
        if len(self.frames) % FULL_CHECK_EVERY == 0:
            self._full_check(raw, kind, first_seq, last)
        self.frames.append((now, first_seq, last))
        self.expected = last + 1
        self.last = last

    def _full_check(self, raw: bytes, kind: bytes, first: int, last: int) -> None:
        message = json.loads(raw)
        events = [message["event"]] if kind == b"event" else message["events"]
        seqs = [event["seq"] for event in events]
        if seqs != list(range(first, last + 1)) or message["seq"] != last:
            self.error(f"full check: seqs {seqs[:3]}..{seqs[-3:]} frame seq {message['seq']}")


async def watch(url: str, token: str, watcher: Watcher) -> None:
    try:
        async with connect(
            url,
            additional_headers={"Authorization": f"Bearer {token}"},
            compression=None,
            max_size=64 * 1024 * 1024,
            open_timeout=10,
        ) as ws:
            while True:
                raw = await ws.recv(decode=False)
                watcher.take(raw, time.time())
    except Exception as error:  # the connection ended: the parent stops the run
        watcher.closed = True
        watcher.error(f"connection ended: {type(error).__name__}: {error}")
        watcher.ready.set()


async def main(url: str, token: str, count: int) -> None:
    loop = asyncio.get_running_loop()
    watchers = [Watcher() for _ in range(count)]
    tasks = [asyncio.create_task(watch(url, token, w)) for w in watchers]
    async with asyncio.timeout(DEADLINE_SECONDS):
        await asyncio.gather(*(w.ready.wait() for w in watchers))
        print("ready", flush=True)
        cpu0, wall0 = time.process_time(), time.monotonic()
        line = await loop.run_in_executor(None, sys.stdin.readline)
        final = int(line.split()[1]) if line.startswith("stop ") else -1
        waited = time.monotonic() + 10.0
        while time.monotonic() < waited and any(w.last < final and not w.closed for w in watchers):
            await asyncio.sleep(0.01)
    cpu = (time.process_time() - cpu0) / (time.monotonic() - wall0)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    report = {
        "cpu": cpu,
        "watchers": [
            {"frames": w.frames, "snapshots": w.snapshots, "last": w.last, "errors": w.errors}
            for w in watchers
        ],
    }
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
