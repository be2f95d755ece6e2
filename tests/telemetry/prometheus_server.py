"""A real Prometheus for the dashboard's tests: Debian's `prometheus` on a free loopback port,
scraping every second one loopback address it is given at start (a socket bound for the test's
gateway), queried through its HTTP API. Without the binary the tests fail, naming the package:
a suite that skipped them would pass without ever running the dashboard's queries.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from tests.waiting import BOUND_SECONDS

PROGRAM = "prometheus"
MISSING = (
    "prometheus is not on PATH: the dashboard tests need Debian's prometheus package "
    "(apt-get install prometheus; `make test` installs it when run as root)"
)
START_SECONDS = BOUND_SECONDS

_CONFIG = """\
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: breakerdeck
    metrics_path: /-/metrics
    static_configs:
      - targets: ["{target}"]
"""


class PrometheusMissing(RuntimeError):
    """`prometheus` is not installed: the message names the package that provides it."""


class PrometheusServer:
    def __init__(self, directory: Path, target: str) -> None:
        program = shutil.which(PROGRAM)
        if program is None:
            raise PrometheusMissing(MISSING)
        self.directory = directory
        config = directory / "prometheus.yml"
        config.write_text(_CONFIG.format(target=target))
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = (directory / "prometheus.log").open("wb")
        self.process = subprocess.Popen(
            [
                program,
                f"--config.file={config}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._ready()

    def _ready(self) -> None:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                if httpx.get(self.url + "/-/ready", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.stop()
        log = (self.directory / "prometheus.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"prometheus did not start: {log}")

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's series (Prometheus's HTTP API, `/api/v1/query`)."""
        answer = httpx.get(self.url + "/api/v1/query", params={"query": expr}, timeout=5)
        body = answer.json()
        assert body["status"] == "success", body
        series: list[dict[str, Any]] = body["data"]["result"]
        return series

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
