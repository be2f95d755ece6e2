"""What fails thousands of times is said once per 10 s with a count, as the gateway says it:
`web`'s refused requests (2,300 once wrote 2,301 lines), and an engine whose disk is full
under `serve` (the same sentence once per failed write)."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.console.web_server import WebServer


def test_a_flood_of_refused_requests_is_one_line_per_reason(tmp_path: Path) -> None:
    server = WebServer(tmp_path, ["demo"]).start()
    try:
        with httpx.Client() as client:
            answers = [client.get(f"{server.url}/x{n}").status_code for n in range(300)]
        assert set(answers) == {401}
        deadline = time.monotonic() + 30
        while not server.refusals() and time.monotonic() < deadline:  # the premise: one said
            time.sleep(0.05)
        time.sleep(0.5)  # room for lines that should not come
        refusals = server.refusals()
        assert len(refusals) == 1, refusals[:5]
        assert "refused: 127.0.0.1 /x0: present a token" in refusals[0]
    finally:
        server.stop()


def _small_files() -> None:
    """The child's files may not grow past 96 KiB: its disk is full, without a mount."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (96 * 1024, 96 * 1024))


#: The console's command line with its log's repeat interval at 1 s, not 10 (`logs.setup`'s
#: own parameter): the line that counts the writes held back comes a second after the first.
QUICK_REPEATS_CLI = [
    sys.executable,
    "-c",
    "import functools, sys\n"
    "from breakerdeck.console.cli import main\n"
    "from breakerdeck.engine.front import logs\n"
    "logs.setup = functools.partial(logs.setup, interval=1.0)\n"
    "sys.exit(main(sys.argv[1:]))\n",
]


def test_serve_on_a_full_disk_says_each_failed_write_once_with_a_count(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    serve = subprocess.Popen(
        [*QUICK_REPEATS_CLI, "serve", "--port", "0", "--state-dir", state, "--speed", "1000"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_small_files,
    )
    assert serve.stderr is not None
    failed: list[str] = []
    try:
        deadline = time.monotonic() + 120
        for line in serve.stderr:  # until a line counts what it held back
            if "audit log" in line and "could not be written" in line:
                failed.append(line)
            if "more like this suppressed" in line and "audit log" in line:
                break
            assert len(failed) <= 3, f"a flood: {failed[:3]}"
            assert time.monotonic() < deadline
    finally:
        serve.send_signal(signal.SIGINT)
        serve.communicate(timeout=60)
    assert failed[0].startswith(
        "breakerdeck serve: breakerdeck.engine.storage.audit: The audit log"
    )
    assert len(failed) == 2
