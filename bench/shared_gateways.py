"""Part 4 of bench/shared.py: gateways under wrk with and without the shared store, and a
trip's propagation gateway to gateway."""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.gateway import (
    PYTHON,
    REPORT_LUA,
    TOKEN,
    UPSTREAM,
    Load,
    _free_port,
    _process,
    wrk,
)
from bench.shared_setup import CONNECTIONS, REPLY_SECONDS, TRIPS, WRK_REPEATS, progress


def _token(n: int) -> str:
    return f"bench-trip-{n:04d}"


#: bench/gateway.py's upstream answering 404: relayed, neither counted nor a success, so polling
#: replica B through it leaves the agent's count (kept by A's failures) alone.
MISSING = UPSTREAM.replace("200 OK", "404 Not Found")
PLATFORMS = ("up", "dead", "missing")


def _config(directory: Path, upstream: int, missing: int, agents: int) -> Path:
    """bench/gateway.py's platforms and agent, a platform answering 404, and `agents` more
    agents, one per propagation round."""
    credential = directory / "credential"
    credential.write_text("platform-credential\n")
    credential.chmod(0o600)
    lines = [
        f'[platforms.up]\nbase_url = "http://127.0.0.1:{upstream}"',
        '[platforms.dead]\nbase_url = "http://127.0.0.1:1"',
        f'[platforms.missing]\nbase_url = "http://127.0.0.1:{missing}"',
    ]
    named = [("bench", TOKEN)] + [(f"trip-{n:04d}", _token(n)) for n in range(agents)]
    for agent, token in named:
        digest = hashlib.sha256(token.encode()).hexdigest()
        lines.append(
            f'[agents.{agent}]\ntoken_sha256 = "{digest}"\n[agents.{agent}.credentials]\n'
            + "".join(f'{name} = {{ file = "{credential}" }}\n' for name in PLATFORMS)
        )
    path = directory / "gateway.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _gateway(config: Path, port: int, shared: str | None) -> list[str]:
    argv = [PYTHON, "-m", "breakerdeck.console.cli", "gateway", "--config", str(config)]
    argv += ["--listen", f"127.0.0.1:{port}"]
    return argv + ([] if shared is None else ["--shared", shared])


@dataclass
class Gateways:
    alone: list[Load] = field(default_factory=list)
    shared: list[Load] = field(default_factory=list)
    pair: list[tuple[Load, Load]] = field(default_factory=list)
    first_403_ms: list[float] = field(default_factory=list)
    fifth_ms: list[float] = field(default_factory=list)
    missed: int = 0


def _first_403(b: str, n: int, polling: threading.Event, found: list[float]) -> None:
    """Replica B, polled for agent n until it answers 403: when that answer arrived."""
    headers = {"Authorization": f"Bearer {_token(n)}"}
    with httpx.Client(base_url=b, headers=headers, timeout=REPLY_SECONDS) as client:
        deadline = time.monotonic() + REPLY_SECONDS
        while time.monotonic() < deadline:
            status = client.get("/p/missing/x").status_code
            polling.set()
            if status == 403:
                found.append(time.monotonic())
                return


def _gateway_propagation(a: str, b: str, trips: int, figures: Gateways) -> None:
    """Each agent once: four failures on A, B polled, then A's fifth failure; the time from
    just before it to B's first 403."""
    for n in range(trips + 5):  # the first five warm up, not counted
        headers = {"Authorization": f"Bearer {_token(n)}"}
        with httpx.Client(base_url=a, headers=headers, timeout=REPLY_SECONDS) as client:
            for _ in range(4):
                client.get("/p/dead/x")
            polling, found = threading.Event(), list[float]()
            poller = threading.Thread(target=_first_403, args=(b, n, polling, found))
            poller.start()
            polling.wait(REPLY_SECONDS)
            start = time.monotonic()
            client.get("/p/dead/x")
            answered = time.monotonic()
            poller.join()
        if n < 5:
            continue
        figures.fifth_ms.append((answered - start) * 1e3)
        if found:
            figures.first_403_ms.append((found[0] - start) * 1e3)
        else:
            figures.missed += 1


def gateways(url: str, trips: int = TRIPS) -> Gateways:
    figures = Gateways()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        script = directory / "report.lua"
        script.write_text(REPORT_LUA)
        up, missing = _free_port(), _free_port()
        config = _config(directory, up, missing, trips + 5)
        ports = [_free_port() for _ in range(3)]
        with contextlib.ExitStack() as running:
            for name, source, port in (("upstream", UPSTREAM, up), ("missing", MISSING, missing)):
                (directory / f"{name}.py").write_text(source)
                running.enter_context(
                    _process([PYTHON, str(directory / f"{name}.py"), str(port)], port)
                )
            for port, shared in zip(ports, (None, url, url), strict=True):
                running.enter_context(_process(_gateway(config, port, shared), port))
            alone, a, b = (f"http://127.0.0.1:{port}" for port in ports)
            progress("gateway propagation, A to B over HTTP ...")
            _gateway_propagation(a, b, trips, figures)
            with ThreadPoolExecutor(2) as pool:
                for n in range(WRK_REPEATS):
                    progress(f"gateways under wrk, round {n + 1} of {WRK_REPEATS} ...")
                    figures.alone.append(wrk(f"{alone}/p/up/x", script))
                    figures.shared.append(wrk(f"{a}/p/up/x", script))
                    half = CONNECTIONS // 2
                    both = [
                        pool.submit(wrk, f"{g}/p/up/x", script, connections=half) for g in (a, b)
                    ]
                    figures.pair.append((both[0].result(), both[1].result()))
    return figures
