"""The proxy's one-line log format never takes a traceback from another handler."""

import logging
import sys

from breakerdeck.engine.front.mcp_serve import _OneLine


def test_the_one_line_format_leaves_the_shared_record_its_traceback():
    try:
        raise OSError(24, "Too many open files")
    except OSError:
        record = logging.LogRecord("up", logging.ERROR, __file__, 1, "boom", None, sys.exc_info())
    line = _OneLine("%(name)s: %(message)s").format(record)
    assert line == "up: boom"
    assert record.exc_info is not None
