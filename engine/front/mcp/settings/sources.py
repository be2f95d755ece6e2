"""Where a stdio server's secrets and an upstream's credential come from, read when it starts:
an env var of the proxy's (read once, at start), a private file, or a command (10 s).
"""

from __future__ import annotations

import os
import subprocess

from breakerdeck.engine.errors import StateDirError
from breakerdeck.engine.front.mcp.classify import StartFailed
from breakerdeck.engine.front.mcp.settings.config import ServerConfig, Source
from breakerdeck.engine.storage import statedir
from breakerdeck.engine.text import printable

#: A credential command gets this long (real seconds) to print the credential.
CREDENTIAL_COMMAND_SECONDS = 10.0


def describe(error: BaseException) -> str:
    """An error as one escaped line: its type and its first line (a group: its first)."""
    if isinstance(error, BaseExceptionGroup) and error.exceptions:
        return describe(error.exceptions[0])
    text = str(error).splitlines()[0] if str(error) else ""
    return printable(f"{type(error).__name__}: {text}" if text else type(error).__name__)[:300]


def read_source(source: Source, what: str, env_value: str | None) -> str:
    """A secret's value: an env var as given, a private file or a command read now."""
    if source.env is not None:
        return env_value or ""
    if source.file is not None:
        try:
            return statedir.read_private(source.file).strip()
        except StateDirError as error:
            raise StartFailed(f"{what} file: {error}") from None
    assert source.command is not None
    return _run_command(source.command)


def read_env(config: ServerConfig) -> str | None:
    credential = config.credential
    if credential is None or credential.env is None:
        return None
    return os.environ.get(credential.env)


def _run_command(command: list[str]) -> str:
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            timeout=CREDENTIAL_COMMAND_SECONDS,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise StartFailed(f"the credential command failed: {describe(error)}") from None
    if done.returncode != 0:
        raise StartFailed(f"the credential command exited {done.returncode}")
    return done.stdout.decode("utf-8", "replace").strip()
