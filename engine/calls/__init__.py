"""One call's path through a shell, written once for every door: the path (`callpath`), the
per-key guard (`guard`), the opt-in probe wait (`probewait`), per-attempt deadlines
(`deadline`) and the agent exchange (`exchange`: credential, send, refresh, classify).

May import: the vocabulary, `core`, `parts` and the `Engine` facade (`breakerdeck.engine.engine`),
whose call path these drive.
"""
