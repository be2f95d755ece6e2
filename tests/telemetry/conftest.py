"""The telemetry tests use the front doors' rigs (a real gateway on a loopback port)."""

from tests.front.conftest import start_gateway

__all__ = ["start_gateway"]
