"""What the gateway was asked to run (`Options`: the doors' options and its own) and what it
refuses before it binds or writes anything (`check_start`, which `--check-config` runs too).

Kept apart from `front.gateway.server`, so that checking a config imports no server.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from breakerdeck.engine.front.gateway.config import GatewayConfig, Shared
from breakerdeck.engine.front.options import DoorOptions, check_bind
from breakerdeck.engine.front.serving import check_feed
from breakerdeck.engine.policy import AgentPolicy


@dataclass(frozen=True, slots=True, kw_only=True)
class Options(DoorOptions):
    """The doors' options (`DoorOptions`) and the gateway's own."""

    config: GatewayConfig
    digests: dict[str, str]
    listen: str
    clock_anchor: float | None = None
    shared: Shared | None = None
    policy: AgentPolicy = field(default_factory=AgentPolicy)


def check_start(options: Options) -> None:
    """Everything the start refuses before it binds or writes anything; `--check-config` runs
    this same check, so a file that checks out is one the gateway starts with. Agents' tokens
    and platforms' answers cross the agents' address."""
    tls = options.config.gateway.tls_cert is not None
    check_bind([options.listen], "gateway", tls, options.insecure_bind)
    check_feed(options.feed_listen, options.state_dir)


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
