"""Recorded incidents read back: a trace's or an audit log's lines indexed (`traceindex`),
cards computed from them by the core's own rule (`replay`), and played at a speed
(`playback`), for `breakerdeck replay` and `whatif`.

May import: the vocabulary and `core`.
"""
