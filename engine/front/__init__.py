"""The front doors: real agents reach the engine over the wire (DESIGN, "Front doors").

Only these modules import the server, MCP, Prometheus and Redis libraries, so an adopter of the
engine as a library never pays for them. Each door is a subpackage (`gateway`, `mcp`); what
both use is here: their start's refusals and helpers (`serving`), their command lines'
argument types (`arguments`), where a config's files are (`paths`), the log (`logs`), the
metrics (`metrics`) and the sped-up clock (`speed`).
"""
