"""A breaker's state: one type from the core through the view, the stored verdict and the feed.

Its values are the design's words (`closed`, `open`, `half_open`, and `held` while an operator
holds the breaker open), so a member is also the
string every reader of the trace, the verdict files and the feed protocol sees.
"""

from enum import StrEnum


class State(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"
    HELD = "held"
