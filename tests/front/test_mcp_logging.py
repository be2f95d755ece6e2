"""The front doors' log: one line per record, never a traceback taken from another handler,
and a failure repeated thousands of times is one line."""

import logging
import sys

import pytest

from breakerdeck.engine.front import logs
from breakerdeck.engine.front.logs import OneLine


def test_the_one_line_format_leaves_the_shared_record_its_traceback():
    try:
        raise OSError(24, "Too many open files")
    except OSError:
        record = logging.LogRecord("up", logging.ERROR, __file__, 1, "boom", None, sys.exc_info())
    line = OneLine("%(name)s: %(message)s").format(record)
    assert line == "up: boom"
    assert record.exc_info is not None


def test_a_door_logs_a_failure_repeated_2500_times_as_one_line(
    capfd: pytest.CaptureFixture[str],
) -> None:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        logs.setup("gateway")
        for _ in range(2500):
            logging.getLogger("breakerdeck.engine.storage.audit").error("the disk is full")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    lines = capfd.readouterr().err.splitlines()
    assert lines == ["breakerdeck gateway: breakerdeck.engine.storage.audit: the disk is full"]
