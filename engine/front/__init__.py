"""The front doors: real agents reach the engine over the wire (DESIGN, "Front doors").

Only these modules import the server, MCP, Prometheus and Redis libraries, so an adopter of the
engine as a library never pays for them.
"""
