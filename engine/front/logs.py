"""The front doors' log: warnings and errors on standard error, one line each, each kind at
most once per 10 s.

A door's log is read by people during an incident, and an incident is when the same thing
fails thousands of times: an upstream that speaks garbage logged a traceback per line it sent,
and a full disk logged one sentence 2,500 times in 55 s. Each record is one escaped line, and
the handler's repeat filter lets a kind through once per interval, the next line saying how
many were suppressed.
"""

from __future__ import annotations

import copy
import logging
import sys

from breakerdeck.engine.feed.repeats import RepeatFilter
from breakerdeck.engine.text import printable


class OneLine(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        # A copy: the record is shared with every other handler, which keeps its traceback.
        line = copy.copy(record)
        line.exc_info = line.exc_text = line.stack_info = None
        return printable(super().format(line))[:500]


def setup(door: str, interval: float = 10.0) -> logging.Handler:
    """Route the process's warnings to standard error as `breakerdeck <door>: …` lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLine(f"breakerdeck {door}: %(name)s: %(message)s"))
    handler.addFilter(RepeatFilter(interval=interval))
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)
    return handler
