"""What `breakerdeck mcp` is told to run: its config file (`config`), a host's `mcpServers`
JSON turned into one (`hostconfig`), and where an upstream's secrets come from (`sources`).

May import: the engine below the doors, `front`'s shared modules, and `front.mcp`'s pure
helpers; never the proxy that runs what it describes.
"""
