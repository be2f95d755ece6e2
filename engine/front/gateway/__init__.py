"""`breakerdeck gateway`: the agent policy on HTTP (DESIGN, "Front doors").

Agents call their platforms through it: the bounded connection (`protocol`), the ASGI app
(`app`) and its exchange's wire (`transport`, `credentials`, `slots`, `relay`), served by
`server` under the command line of `cli`.
"""
