"""What outlives the process: the state dir (`statedir`), the verdict store (`store`), the
append-only audit log (`audit`) and the headless trace's writer (`tracefile`).

May import: the vocabulary at the top of `breakerdeck.engine` and `core`.
"""
