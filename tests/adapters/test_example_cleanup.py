"""An example leaves no state behind: its temporary state dir (with the feed's operator token
after `--serve`) is gone when it ends, however it ends; and story.py, run alone, says it is
the examples' shared module."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.adapters.test_feed_and_examples import EXAMPLES

EXAMPLE = str(EXAMPLES / "pydantic_ai_agent.py")


def left_behind(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.glob("breakerdeck-example-*"))


def start(tmp: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, EXAMPLE, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp)},
    )


def test_a_run_to_its_end_removes_its_state_dir(tmp_path: Path) -> None:
    done = start(tmp_path)
    out, err = done.communicate(timeout=120)
    assert done.returncode == 0, err
    assert out.rstrip().endswith("crm@default is closed; the CRM saw 5 requests")
    assert left_behind(tmp_path) == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_served_example_stopped_by_a_signal_removes_its_state_dir_and_token(
    tmp_path: Path, signum: signal.Signals
) -> None:
    served = start(tmp_path, "--serve", "127.0.0.1:0", "--pause", "0")
    assert served.stdout is not None
    lines = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # the premise: it serves, its token written
        line = served.stdout.readline()
        lines.append(line)
        if line.startswith("serving until Ctrl-C") or not line:
            break
    assert lines[-1].startswith("serving until Ctrl-C"), "".join(lines)
    [state] = left_behind(tmp_path)
    assert (tmp_path / state / "operator.token").exists()
    served.send_signal(signum)
    _, err = served.communicate(timeout=60)
    assert served.returncode == 0, err
    assert "Traceback" not in err
    assert left_behind(tmp_path) == []


def test_story_run_alone_says_it_is_the_shared_module_and_names_the_examples() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "story.py")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert "story.py is the examples' shared module, not an example" in done.stderr
    assert "examples/pydantic_ai_agent.py" in done.stderr
