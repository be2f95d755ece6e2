"""The engine's parts, each owning its state, called downward by the `Engine` facade: the key
table (`keys`), the call's ticket (`call`), the ledger of seqs (`ledger`), the outbox of
listeners (`outbox`), durability (`durability`), timers (`timers`), views and tallies
(`views`), the lines a decision writes (`lines`), who decides (`decide`) and each operation's
body, once (`operations`).

May import: the vocabulary at the top of `breakerdeck.engine`, `core` and `storage`.
"""
