"""`breakerdeck gateway` under wrk, beside the relays it is measured against (issue 11).

Printed, never asserted. Each figure is measured in this one run against the same static
upstream (a raw asyncio HTTP/1.1 server, far faster than any relay here):
- relayed requests/s at 64 connections: the gateway (breaker on), a minimal uvicorn + httpx
  relay with no breaker, nginx (one worker) proxying the same upstream;
- added latency p50/p99 at a fixed rate well below saturation (wrk paced by a Lua `delay()`,
  since Debian's wrk 4.1 has no rate flag): through the gateway minus straight to the upstream;
- fast-fail requests/s with the agent's breaker open, beside a bare uvicorn app answering a
  constant 403;
- breakerdeck's own share of the gateway's CPU under relayed load (py-spy samples whose
  innermost frame is in breakerdeck's code), or cProfile's when py-spy is not installed.

Run alone: `.venv/bin/python bench/gateway.py`. Needs `wrk` (apt) and, for its row, `nginx`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

PYTHON = sys.executable
BIN = Path(PYTHON).parent
DURATION = int(os.environ.get("GATEWAY_BENCH_SECONDS", "6"))
CONNECTIONS = 64
PACED_RATE = 400  # requests/s for the latency run, well below every relay's saturation
PACED_CONNECTIONS = 8
FAST_FAIL_ROUNDS = 5
TOKEN = "bench-agent-token"
_AUTH = {"Authorization": f"Bearer {TOKEN}"}

UPSTREAM = r"""
import asyncio, sys
try:
    import uvloop; uvloop.install()
except ImportError:
    pass
ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n"
          b'{"ok": true}\n')

class Upstream(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport, self.buffer = transport, b""
    def data_received(self, data):
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head, rest = self.buffer[:end], self.buffer[end + 4:]
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(rest) < length:
                return
            self.buffer = rest[length:]
            self.transport.write(ANSWER)

async def main():
    server = await asyncio.get_running_loop().create_server(
        Upstream, "127.0.0.1", int(sys.argv[1]), backlog=2048)
    await server.serve_forever()
asyncio.run(main())
"""

HTTPX_RELAY = r"""
import os, httpx
UP = os.environ["UPSTREAM"]
state = {}

async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                state["client"] = httpx.AsyncClient(
                    base_url=UP, limits=httpx.Limits(max_connections=128,
                    max_keepalive_connections=128), timeout=30)
                await send({"type": "lifespan.startup.complete"})
            else:
                await state["client"].aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    response = await state["client"].request(scope["method"], scope["raw_path"].decode(),
                                             content=body or None)
    await send({"type": "http.response.start", "status": response.status_code,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": response.content})
"""

BARE_403 = r"""
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 403,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b'{"error": "agent_halted"}'})
"""

#: A bare app answering the gateway's own 403, byte for byte (headers and body captured from
#: the running gateway, the call id counted as the gateway counts it): the floor uvicorn puts
#: under a refusal of DESIGN's shape, to read the fast-fail ratio against.
SAME_403 = r"""
import json, os
SHAPE = json.loads(os.environ["HALTED"])
HEADERS = [(n.encode(), v.encode()) for n, v in SHAPE["headers"] if n != "x-breakerdeck-call"]
BODY = SHAPE["body"].encode()
NUMBER = [0]

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    NUMBER[0] += 1
    headers = [*HEADERS, (b"x-breakerdeck-call", b"call-%06d" % NUMBER[0])]
    await send({"type": "http.response.start", "status": 403, "headers": headers})
    await send({"type": "http.response.body", "body": BODY})
"""

NGINX = """
worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/nginx.error.log;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    upstream platform {{ server 127.0.0.1:{upstream}; keepalive 64; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://platform;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
    }}
}}
"""

REPORT_LUA = r"""
local rate = tonumber(os.getenv("WRK_RATE") or "0")
local conns = tonumber(os.getenv("WRK_CONNS") or "1")
if rate > 0 then
  delay = function() return 1000 * conns / rate end
end
done = function(summary, latency, requests)
  io.write(string.format("RESULT reqs=%d secs=%.3f rps=%.1f p50_ms=%.3f p99_ms=%.3f errors=%d\n",
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
"""


@dataclass
class Load:
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_for(port: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port}")


@contextlib.contextmanager
def _process(argv: list[str], port: int, **kwargs: object) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs)  # type: ignore[call-overload]
    try:
        _wait_for(port)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _uvicorn(directory: Path, module: str, port: int) -> list[str]:
    return [
        PYTHON, "-m", "uvicorn", f"{module}:app", "--app-dir", str(directory),
        "--host", "127.0.0.1", "--port", str(port), "--loop", "uvloop", "--http", "httptools",
        "--no-access-log", "--log-level", "warning", "--backlog", "2048",
    ]  # fmt: skip


def wrk(url: str, script: Path, *, connections: int = CONNECTIONS, rate: int = 0) -> Load:
    env = {**os.environ, "WRK_RATE": str(rate), "WRK_CONNS": str(connections)}
    argv = ["wrk", "-t1", f"-c{connections}", f"-d{DURATION}s", "--latency", "-s", str(script)]
    argv += ["-H", f"Authorization: Bearer {TOKEN}", url]
    subprocess.run([*argv[:3], "-d1s", *argv[4:]], capture_output=True, env=env, check=False)
    out = subprocess.run(argv, capture_output=True, text=True, env=env, check=False).stdout
    found = re.search(r"rps=([\d.]+) p50_ms=([\d.]+) p99_ms=([\d.]+) errors=(\d+)", out)
    if found is None:
        raise RuntimeError(f"wrk printed no result: {out}")
    rps, p50, p99, errors = found.groups()
    return Load(float(rps), float(p50), float(p99), int(errors))


def _gateway_config(directory: Path, upstream: int) -> Path:
    credential = directory / "credential"
    credential.write_text("platform-credential\n")
    credential.chmod(0o600)
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    path = directory / "gateway.toml"
    path.write_text(
        f"""
[platforms.up]
base_url = "http://127.0.0.1:{upstream}"
[platforms.dead]
base_url = "http://127.0.0.1:1"
[agents.bench]
token_sha256 = "{digest}"
[agents.bench.credentials]
up = {{ file = "{credential}" }}
dead = {{ file = "{credential}" }}
"""
    )
    return path


def _gateway(config: Path, port: int) -> list[str]:
    return [
        PYTHON, "-m", "breakerdeck.console.cli", "gateway",
        "--config", str(config), "--listen", f"127.0.0.1:{port}",
    ]  # fmt: skip


def _own_cpu_share(pid: int, url: str, script: Path) -> tuple[float | None, str]:
    """breakerdeck's share of the gateway's sampled CPU under relayed load."""
    spy = shutil.which("py-spy") or str(BIN / "py-spy")
    if not Path(spy).exists():
        return None, "py-spy not installed (pip install py-spy)"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "stacks.txt"
        argv = [spy, "record", "--pid", str(pid), "--duration", str(DURATION), "--rate", "250",
                "--format", "raw", "--output", str(out), "--nonblocking"]  # fmt: skip
        recorder = subprocess.Popen(
            argv,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(0.5)
        wrk(url, script)
        recorder.wait(DURATION + 30)
        if not out.exists():
            return None, "py-spy could not sample (ptrace not permitted?)"
        own = total = 0
        for line in out.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            innermost = stack.rsplit(";", 1)[-1]
            total += int(count)
            if _OWN.search(innermost):
                own += int(count)
    return (own / total if total else None), "py-spy, innermost frame in breakerdeck"


#: A frame in breakerdeck's code: py-spy prints paths relative to the working directory
#: (`engine/front/gateway/app.py`) or through the installed package (`breakerdeck/engine/…`).
_OWN = re.compile(
    r"\((?:.*/)?(?:breakerdeck/)?(?:engine|console|fixtures)/[^/]*(?:/[^/]*){0,2}\.py:"
)


@dataclass
class Figures:
    upstream: Load
    gateway: Load
    httpx_relay: Load
    nginx: Load | None
    upstream_paced: Load
    gateway_paced: Load
    fast_fail: Load
    bare_403: Load
    #: Median over `FAST_FAIL_ROUNDS` of fast-fail ÷ bare 403, each round's runs back to
    #: back: one pair of runs on a shared box moved between 0.5x and 0.9x.
    fast_ratio: float
    own_share: float | None
    own_share_how: str
    #: The bare app answering the gateway's own 403 bytes, from the median round above.
    same_403: Load
    #: Medians over the same rounds: fast-fail ÷ that app (what breakerdeck's code costs), and
    #: that app ÷ the bare 403 (what DESIGN's headers and body cost uvicorn).
    fast_ratio_same: float
    bytes_ratio: float


def run() -> Figures:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        for name, source in (("upstream", UPSTREAM), ("httpxrelay", HTTPX_RELAY)):
            (directory / f"{name}.py").write_text(source)
        (directory / "bare403.py").write_text(BARE_403)
        (directory / "same403.py").write_text(SAME_403)
        script = directory / "report.lua"
        script.write_text(REPORT_LUA)
        up = _free_port()
        with _process([PYTHON, str(directory / "upstream.py"), str(up)], up):
            return _measure(directory, up, script)


def _measure(directory: Path, up: int, script: Path) -> Figures:
    _progress("upstream alone ...")
    upstream = wrk(f"http://127.0.0.1:{up}/x", script)
    upstream_paced = wrk(
        f"http://127.0.0.1:{up}/x", script, connections=PACED_CONNECTIONS, rate=PACED_RATE
    )
    config = _gateway_config(directory, up)
    port = _free_port()
    _progress("the gateway: relayed, paced, CPU share, fast-fail ...")
    with _process(_gateway(config, port), port) as gateway_process:
        url = f"http://127.0.0.1:{port}/p/up/x"
        gateway = wrk(url, script)
        gateway_paced = wrk(url, script, connections=PACED_CONNECTIONS, rate=PACED_RATE)
        share, how = _own_cpu_share(gateway_process.pid, url, script)
        for _ in range(5):  # five upstream failures trip the agent
            httpx.get(f"http://127.0.0.1:{port}/p/dead/x", headers=_AUTH)
        halted = httpx.get(url, headers=_AUTH)
        shape = {"headers": list(halted.headers.items()), "body": halted.text}
        _progress("fast-fail against bare uvicorn apps answering 403, in turn ...")
        bare_port, same_port = _free_port(), _free_port()
        same_env = {**os.environ, "HALTED": json.dumps(shape)}
        with (
            _process(_uvicorn(directory, "bare403", bare_port), bare_port),
            _process(_uvicorn(directory, "same403", same_port), same_port, env=same_env),
        ):
            rounds = [
                (
                    wrk(url, script),
                    wrk(f"http://127.0.0.1:{bare_port}/x", script),
                    wrk(f"http://127.0.0.1:{same_port}/x", script),
                )
                for _ in range(FAST_FAIL_ROUNDS)
            ]
    rounds.sort(key=lambda each: each[0].rps / each[1].rps)
    fast_fail, bare, same = rounds[len(rounds) // 2]
    _progress("a minimal uvicorn + httpx relay ...")
    port = _free_port()
    env = {**os.environ, "UPSTREAM": f"http://127.0.0.1:{up}"}
    with _process(_uvicorn(directory, "httpxrelay", port), port, env=env):
        httpx_relay = wrk(f"http://127.0.0.1:{port}/x", script)
    return Figures(
        upstream, gateway, httpx_relay, _nginx(directory, up, script), upstream_paced,
        gateway_paced, fast_fail, bare, fast_fail.rps / bare.rps, share, how, same,
        _median(r[0].rps / r[2].rps for r in rounds), _median(r[2].rps / r[1].rps for r in rounds),
    )  # fmt: skip


def _median(ratios: Iterable[float]) -> float:
    return statistics.median(ratios)


def _nginx(directory: Path, up: int, script: Path) -> Load | None:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        return None
    _progress("nginx proxying the same upstream ...")
    port = _free_port()
    conf = directory / "nginx.conf"
    conf.write_text(NGINX.format(dir=directory, upstream=up, port=port))
    with _process([nginx, "-c", str(conf), "-p", str(directory)], port):
        return wrk(f"http://127.0.0.1:{port}/x", script)


def render(f: Figures) -> str:
    relayed_ratio = f.gateway.rps / f.httpx_relay.rps
    fast_ratio = f.fast_ratio
    added_p50 = f.gateway_paced.p50_ms - f.upstream_paced.p50_ms
    added_p99 = f.gateway_paced.p99_ms - f.upstream_paced.p99_ms
    nginx = f"{f.nginx.rps:,.0f}" if f.nginx else "not installed (apt-get install nginx)"
    share = "n/a" if f.own_share is None else f"{f.own_share:.1%}"
    lines = [
        f"breakerdeck gateway under wrk (-t1, {DURATION} s per run, {CONNECTIONS} connections)",
        f"  upstream alone                      {f.upstream.rps:>10,.0f} req/s",
        f"  gateway, relayed (breaker on)       {f.gateway.rps:>10,.0f} req/s"
        f"   {relayed_ratio:.2f}x the httpx relay  target >= 1.5x"
        f"  {'MET' if relayed_ratio >= 1.5 else 'MISSED'}",
        f"  minimal uvicorn + httpx relay       {f.httpx_relay.rps:>10,.0f} req/s",
        f"  nginx (1 worker) proxying           {nginx:>10} req/s",
        f"  added latency at {PACED_RATE} req/s        p50 {added_p50:+.2f} ms,"
        f" p99 {added_p99:+.2f} ms"
        f"  (gateway {f.gateway_paced.p50_ms:.2f}/{f.gateway_paced.p99_ms:.2f},"
        f" upstream {f.upstream_paced.p50_ms:.2f}/{f.upstream_paced.p99_ms:.2f})",
        f"  fast-fail, breaker open             {f.fast_fail.rps:>10,.0f} req/s"
        f"   {fast_ratio:.2f}x the bare 403 app (median of {FAST_FAIL_ROUNDS} rounds)"
        f"  target >= 0.8x"
        f"  {'MET' if fast_ratio >= 0.8 else 'MISSED'}",
        f"  bare uvicorn constant 403           {f.bare_403.rps:>10,.0f} req/s",
        f"  bare uvicorn, the gateway's 403     {f.same_403.rps:>10,.0f} req/s"
        f"   {f.bytes_ratio:.2f}x the bare 403 app; fast-fail is"
        f" {f.fast_ratio_same:.2f}x this one (medians)",
        f"  breakerdeck's own CPU share         {share:>10}   target <= 10%"
        f"  {'MET' if f.own_share is not None and f.own_share <= 0.10 else 'MISSED'}"
        f"  ({f.own_share_how})",
    ]
    return "\n".join(lines)


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main() -> None:
    print(render(run()), flush=True)


if __name__ == "__main__":
    main()
