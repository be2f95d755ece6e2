"""A logging filter that lets the same error through once per interval and counts the rest.

A feed under attack, or a process out of file descriptors, fails the same way thousands of
times a second; each failure logged with its traceback once filled a log with 78 MB in a
minute. This filter keeps the first record of each kind, drops its repeats for `interval`
seconds, and adds how many it dropped to the next record of that kind it lets through.

"The same" is the same logger, level and line; for a record with a traceback, the same
logger, level, message template and exception type (the arguments, such as a peer's address,
may differ: it is still the same failure). A record can name its kind itself, as
`extra={"repeat_kind": …}`: `web`'s refusals are one kind per reason, whatever the address
and path each names (2,300 refused requests once wrote 2,301 lines).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass

#: Kinds remembered at once; the oldest are forgotten first (memory stays bounded).
MAX_KINDS = 1024


@dataclass(slots=True)
class _Seen:
    until: float
    suppressed: int = 0


class RepeatFilter(logging.Filter):
    """Attach to a logger (`logger.addFilter`); `clock` is monotonic seconds."""

    def __init__(self, interval: float = 10.0, clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.interval = interval
        self.clock = clock
        self._seen: OrderedDict[Hashable, _Seen] = OrderedDict()
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        key = _kind(record)
        now = self.clock()
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None and now < seen.until:
                seen.suppressed += 1
                return False
            self._seen[key] = _Seen(until=now + self.interval)
            self._seen.move_to_end(key)
            while len(self._seen) > MAX_KINDS:
                self._seen.popitem(last=False)
        if seen is not None and seen.suppressed:
            # Plain text appended to the template: it holds no % for the formatter to read.
            record.msg = (
                f"{record.msg} ({seen.suppressed} more like this suppressed since the last one)"
            )
        return True


def _kind(record: logging.LogRecord) -> Hashable:
    named: Hashable | None = getattr(record, "repeat_kind", None)
    if named is not None:
        return (record.name, record.levelno, named)
    if record.exc_info and record.exc_info[0] is not None:
        return (record.name, record.levelno, str(record.msg), record.exc_info[0])
    return (record.name, record.levelno, record.getMessage())
