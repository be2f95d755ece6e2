"""Where a file a door's config names is: beside the config, for the gateway's and the MCP
proxy's alike (credential and password files, the state dir)."""

from __future__ import annotations

from pathlib import Path


def resolve(config_path: str | Path, file: str) -> Path:
    """Where a file named in the config is: relative to the config's own folder."""
    return Path(config_path).parent / Path(file).expanduser()
