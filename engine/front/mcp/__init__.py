"""`breakerdeck mcp`: the tool policy in front of MCP servers (DESIGN, "Front doors").

An MCP server to the host (`stdio`, `http`) in front of the upstream servers its config names
(`upstream`), each behind its own breaker (`breakers`): `proxy` lists and calls the tools,
`call` runs a `tools/call` down the one call path, `serve` starts it under `cli`.
"""
