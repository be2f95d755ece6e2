"""The pure core: one breaker's rule (`breaker`), what an attempt's outcome is (`classify`) and
what a verdict keeps (`verdict`). Sans I/O: no clock of its own, no lock, no file, no socket.

May import: the vocabulary at the top of `breakerdeck.engine` (`clock`, `errors`, `events`,
`outcomes`, `policy`, `results`, `state`, `text`) and nothing else of breakerdeck.
"""
