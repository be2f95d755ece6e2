"""The page hook runs the operator's command with the page as JSON on standard input."""

import json
import sys
import threading

import pytest

from breakerdeck.engine.page import command_hook


def wait_for_threads() -> None:
    for thread in threading.enumerate():
        if thread.name == "page-hook":
            thread.join(timeout=10)


def test_the_command_gets_the_page_as_json_on_stdin(tmp_path):
    out = tmp_path / "page.json"
    script = f"import sys; open({str(out)!r}, 'w').write(sys.stdin.read())"
    hook = command_hook(f"{sys.executable} -c {json.dumps(script)}")
    hook({"type": "circuit_breaker.page", "key": "payments@prod", "seq": 9})
    wait_for_threads()
    assert json.loads(out.read_text()) == {
        "type": "circuit_breaker.page",
        "key": "payments@prod",
        "seq": 9,
    }


def test_a_failing_command_is_logged_and_never_raised(caplog):
    hook = command_hook(f"{sys.executable} -c 'import sys; sys.exit(3)'")
    hook({"type": "circuit_breaker.page"})
    wait_for_threads()
    assert "exited 3" in caplog.text


def test_a_missing_command_is_logged_and_never_raised(caplog):
    hook = command_hook("/nonexistent/pager --loud")
    hook({"type": "circuit_breaker.page"})
    wait_for_threads()
    assert "failed" in caplog.text


def test_an_empty_command_is_refused_at_once():
    with pytest.raises(ValueError, match="empty"):
        command_hook("   ")
