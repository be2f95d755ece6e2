"""The agents' platform credentials: read from an env var, a file or a command (a vault CLI).

A fetch runs under its own deadline: a command that hangs, fails or prints nothing is the
vault unreachable, which the `agent` policy counts as an upstream failure. Values are kept in
memory after the first read (an env var is read once, at start) and read again from their
source on a refresh and on an operator's reset. No message, `repr` or log line ever carries a
credential, a command's output or its error stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from breakerdeck.engine.errors import StateDirError, VaultUnavailable
from breakerdeck.engine.front.gateway.config import Credential, GatewayConfig, Source
from breakerdeck.engine.front.paths import resolve
from breakerdeck.engine.storage import statedir

log = logging.getLogger(__name__)

#: A credential is a line of text, not a document: a command printing more is misconfigured.
MAX_OUTPUT_BYTES = 65_536


class SecretSource:
    """One way to read a secret; its `repr` names the kind and the place, never the value."""

    def __init__(self, source: Source, config_path: Path) -> None:
        self.env = source.env
        self.file = None if source.file is None else resolve(config_path, source.file)
        self.command = None if source.command is None else list(source.command)
        self._env_value = os.environ.get(self.env) if self.env is not None else None

    def __repr__(self) -> str:
        if self.env is not None:
            return f"SecretSource(env={self.env!r})"
        if self.file is not None:
            return f"SecretSource(file={str(self.file)!r})"
        return f"SecretSource(command={self.command!r})"

    async def read(self, timeout: float) -> str:
        """The secret now, stripped; `VaultUnavailable` (message without the value) if not.
        Its reason names a file or a command, so it is said on the operator's log only: the
        agent's answer says the vault was unreachable, nothing more."""
        try:
            return await self._read(timeout)
        except VaultUnavailable as error:
            log.warning("credential source unavailable: %s", error)
            raise

    async def _read(self, timeout: float) -> str:
        if self.env is not None:
            value = self._env_value or ""
        elif self.file is not None:
            value = _read_file(self.file)
        else:
            value = await _run(self.command or [], timeout)
        value = value.strip()
        if not value:
            raise VaultUnavailable(f"{self!r} gave an empty credential")
        return value


def _read_file(path: Path) -> str:
    try:
        return statedir.read_private(path)
    except StateDirError as error:
        raise VaultUnavailable(str(error)) from None


async def _run(argv: list[str], timeout: float) -> str:
    """A vault command's standard output; its standard error is discarded, never logged
    (a CLI may print the secret or a session token there)."""
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as error:
        raise VaultUnavailable(f"cannot run {argv[0]!r}: {error.strerror or error}") from None
    try:
        async with asyncio.timeout(timeout):
            assert process.stdout is not None
            output = await process.stdout.read(MAX_OUTPUT_BYTES + 1)
            code = await process.wait()
    except TimeoutError:
        raise VaultUnavailable(f"{argv[0]!r} did not answer within {timeout:g} s") from None
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
    if code != 0:
        raise VaultUnavailable(f"{argv[0]!r} exited with status {code}")
    if len(output) > MAX_OUTPUT_BYTES:
        raise VaultUnavailable(f"{argv[0]!r} printed more than {MAX_OUTPUT_BYTES} bytes")
    try:
        return output.decode("utf-8")
    except UnicodeDecodeError:
        raise VaultUnavailable(f"{argv[0]!r} printed something that is not UTF-8") from None


@dataclass(slots=True)
class _Held:
    """One agent's credential for one platform, as last read."""

    source: SecretSource
    refresh_source: SecretSource | None
    client_id: str | None
    client_secret_file: Path | None
    value: str | None = field(default=None, repr=False)
    refresh_token: str | None = field(default=None, repr=False)


class Vault:
    """Every agent's granted credentials, by (agent, platform)."""

    def __init__(self, config: GatewayConfig, config_path: Path) -> None:
        self._held: dict[tuple[str, str], _Held] = {}
        for agent, table in config.agents.items():
            for platform, credential in table.credentials.items():
                self._held[(agent, platform)] = _held(credential, config_path)

    def __repr__(self) -> str:
        return f"Vault({len(self._held)} credentials)"

    def granted(self, agent: str, platform: str) -> bool:
        return (agent, platform) in self._held

    def is_env(self, agent: str, platform: str) -> bool:
        """Whether the credential is an env var's, read once at start: nothing refreshes it."""
        return self._held[(agent, platform)].source.env is not None

    def held(self, agent: str, platform: str) -> str | None:
        """The credential already in hand, if any: most calls need no coroutine for it."""
        return self._held[(agent, platform)].value

    async def fetch(self, agent: str, platform: str, timeout: float) -> str:
        held = self._held[(agent, platform)]
        if held.value is None:
            held.value = await held.source.read(timeout)
        return held.value

    async def reread(self, agent: str, platform: str, timeout: float) -> str:
        """The refresh without a `token_url`: read the source again (the operator may have
        rotated the file, or the vault now hands out a new token)."""
        held = self._held[(agent, platform)]
        held.value = None
        held.value = await held.source.read(timeout)
        return held.value

    async def refresh_grant_form(self, agent: str, platform: str, timeout: float) -> dict[str, str]:
        """The OAuth 2.0 refresh-token grant's form (RFC 6749 section 6)."""
        held = self._held[(agent, platform)]
        if held.refresh_token is None and held.refresh_source is not None:
            held.refresh_token = await held.refresh_source.read(timeout)
        if held.refresh_token is None:
            raise VaultUnavailable("no refresh_token configured for this credential")
        form = {"grant_type": "refresh_token", "refresh_token": held.refresh_token}
        if held.client_id is not None:
            form["client_id"] = held.client_id
        if held.client_secret_file is not None:
            form["client_secret"] = _read_file(held.client_secret_file).strip()
        return form

    def granted_token(self, agent: str, platform: str, answer: Any) -> str | None:
        """Keep what a token endpoint answered: the new access token, and a rotated refresh
        token when it sent one."""
        if not isinstance(answer, dict) or not isinstance(answer.get("access_token"), str):
            return None
        held = self._held[(agent, platform)]
        held.value = answer["access_token"]
        if isinstance(answer.get("refresh_token"), str):
            held.refresh_token = answer["refresh_token"]
        return held.value

    def forget(self, agent: str) -> None:
        """After a reset: the next call reads the agent's file and command credentials again
        (an env value stays as read at start: a new one needs a restart)."""
        for (owner, _), held in self._held.items():
            if owner == agent and held.source.env is None:
                held.value = None
                held.refresh_token = None


def _held(credential: Credential, config_path: Path) -> _Held:
    return _Held(
        source=SecretSource(credential, config_path),
        refresh_source=(
            None
            if credential.refresh_token is None
            else SecretSource(credential.refresh_token, config_path)
        ),
        client_id=credential.client_id,
        client_secret_file=(
            None
            if credential.client_secret_file is None
            else resolve(config_path, credential.client_secret_file)
        ),
    )
