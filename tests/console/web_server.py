"""A real `breakerdeck web` process and a real headless chromium, for the browser tests.

The server runs as the command line starts it (its own process, its own consoles); what it
says on standard error is collected, so a test can count the consoles it started and read why
it refused a request. The browser is Debian's `chromium`, driven by Playwright through its
`executable_path` (Playwright's own download is never used); without it the tests fail naming
the package, never skip.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.waiting import BOUND_SECONDS

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWER_TOKEN = "viewer-token-for-the-browser-tests"
OPERATOR_TOKEN = "operator-token-for-the-browser-tests"

#: Captures the page's xterm.js terminal as textual.js creates it (`this.terminal = new
#: Terminal(…)`): its buffer is the text the page shows, drawn on a canvas the DOM cannot read.
CAPTURE_TERMINAL = """
Object.defineProperty(Object.prototype, 'terminal', {
  configurable: true,
  set(value) {
    delete Object.prototype.terminal;
    this.terminal = value;
    window.__terminal = value;
  },
});
"""
#: The terminal's lines, as the page shows them.
TERMINAL_TEXT = """() => {
  const terminal = window.__terminal;
  if (!terminal) return '';
  const buffer = terminal.buffer.active;
  const lines = [];
  for (let i = 0; i < buffer.length; i++) lines.push(buffer.getLine(i).translateToString(true));
  return lines.join('\\n');
}"""


def chromium_missing() -> str | None:
    if CHROMIUM.exists():
        return None
    return (
        f"the browser tests need Debian's chromium at {CHROMIUM}: apt-get install chromium "
        "(make test installs it)"
    )


@dataclass
class WebServer:
    """`breakerdeck web … demo` in a process of its own, and what it said."""

    directory: Path
    served: list[str]
    max_consoles: int = 2
    #: More of `web`'s options (`--tls-cert …`).
    options: list[str] = field(default_factory=list)
    url: str = ""
    said: list[str] = field(default_factory=list)
    process: subprocess.Popen[str] | None = None

    def start(self, timeout: float = BOUND_SECONDS) -> WebServer:
        viewer, operator = self.directory / "viewer.token", self.directory / "operator.token"
        for path, token in ((viewer, VIEWER_TOKEN), (operator, OPERATOR_TOKEN)):
            path.write_text(token + "\n")
            path.chmod(0o600)
        argv = [
            *("web", "--listen", "127.0.0.1:0", "--max-consoles", str(self.max_consoles)),
            *("--viewer-token-file", str(viewer), "--operator-token-file", str(operator)),
            *self.options,
            *self.served,
        ]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "breakerdeck.console.cli", *argv],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not self.url:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"breakerdeck web did not start: {self.said}")
            time.sleep(0.05)
        return self

    def _read(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        for line in self.process.stderr:
            found = re.search(r"serving .* on (https?://\S+?)/ ", line)
            if found:
                self.url = found.group(1)
            self.said.append(line.rstrip("\n"))

    @property
    def origin(self) -> str:
        return self.url

    @property
    def websocket_url(self) -> str:
        scheme, _, rest = self.url.partition("://")
        return f"{'wss' if scheme == 'https' else 'ws'}://{rest}/ws"

    def consoles_started(self) -> int:
        return sum(" started for the " in line for line in self.said)

    def refusals(self) -> list[str]:
        return [line for line in self.said if "web: refused" in line]

    def refused_since(
        self, mark: int, what: str, count: int, timeout: float = BOUND_SECONDS
    ) -> int:
        """How many refusals after the `mark`th say `what`, waiting until there are `count`:
        each is said before any handler would have run, so a console that request was let
        through to would have been started by then."""
        deadline = time.monotonic() + timeout
        while True:
            found = sum(what in line for line in self.refusals()[mark:])
            if found >= count or time.monotonic() > deadline:
                return found
            time.sleep(0.02)

    def consoles_running(self) -> int:
        """The server's child processes, from /proc: what textual-serve started and did not
        stop yet."""
        assert self.process is not None
        pid = self.process.pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return len(children)

    def stop(self) -> int | None:
        """SIGTERM, as a service manager stops it; its exit status."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()
