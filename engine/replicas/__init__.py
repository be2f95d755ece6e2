"""One agent's breaker shared by gateway replicas: the fleet's member (`fleet`), what a member
needs of a store (`replica`) and the store URLs (`store_url`). The Redis store itself is
`breakerdeck.engine.shared`, named by the docs.

May import: the vocabulary, `core`, `storage` and `parts`.
"""
