"""The gateway's TOML file as strict models: a typo is refused at start, naming where it is.

Every table forbids unknown keys and every value is checked for its type without coercion, so
`drain_seconds = "30"` or `tokn_sha256 = …` stops the start (exit 2) with the file, the table
and the key, instead of running with a default the operator did not mean. Files named by the
config (token and credential files) are opened here, at start, with the state dir's rules.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Self
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from breakerdeck.engine.errors import StateDirError
from breakerdeck.engine.front.options import Address, DoorTable, check_address
from breakerdeck.engine.front.paths import resolve
from breakerdeck.engine.policy import MAX_DEADLINE_SECONDS, AgentPolicy
from breakerdeck.engine.replicas.store_url import parse_store_url
from breakerdeck.engine.storage import statedir

MIB = 1024 * 1024

#: A platform's name is one path segment of `/p/<platform>/…`: nothing to percent-encode.
_PLATFORM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")
#: An agent id is a breaker key and an audit field: printable, bounded, no spaces.
_AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@:-]{0,127}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_DEADLINE = AgentPolicy().deadline_seconds


class ConfigError(Exception):
    """Why a config cannot be used: `file: [table] key: problem`, one line per problem."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


Deadline = Annotated[float, Field(gt=0, le=MAX_DEADLINE_SECONDS)]


class GatewayTable(_Strict, DoorTable):
    """`[gateway]`: the keys every door reads alike (`DoorTable`), what a stranger may cost
    before its token is read (`StrangerBounds`), and the gateway's own."""

    listen: Address = "127.0.0.1:8080"
    drain_seconds: Annotated[float, Field(gt=0, le=3600)] = 30.0
    body_limit_bytes: Annotated[int, Field(gt=0)] = 10 * MIB
    replay_buffer_bytes: Annotated[int, Field(ge=0)] = MIB
    #: Every platform's deadline unless its table sets one (the policy's 30 s without either).
    deadline_seconds: Deadline | None = None
    # Connections to platforms (a shared service: no agent can take them all).
    max_connections: Annotated[int, Field(ge=1, le=65_536)] = 256
    max_connections_per_agent: Annotated[int, Field(ge=1, le=65_536)] = 64

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        return check_address(value)


def _check_url(value: str) -> str:
    """An http(s) URL with a host and nothing after the path: the gateway appends to it."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"expected an http:// or https:// URL with a host, got {value!r}")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError(f"{value!r}: no query, fragment or user info in a platform URL")
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as error:
        raise ValueError(f"{value!r}: {error}") from None
    return value


class PlatformTable(_Strict):
    base_url: str
    token_url: str | None = None
    deadline_seconds: Deadline | None = None
    #: At most this platform's deadline (checked against it in `GatewayConfig`).
    probe_wait_seconds: Annotated[float, Field(ge=0, le=MAX_DEADLINE_SECONDS)] = 0.0
    #: The statuses read as a rejected credential (DESIGN): a 403 left out is relayed as the
    #: platform's own answer, uncounted, for platforms whose 403 means "not allowed".
    auth_failure_statuses: list[int] = Field(default_factory=lambda: [401, 403])

    @field_validator("auth_failure_statuses")
    @classmethod
    def _auth_statuses(cls, value: list[int]) -> list[int]:
        if not value or not set(value) <= {401, 403} or len(set(value)) != len(value):
            raise ValueError("a non-empty list of 401 and/or 403")
        return value

    @field_validator("base_url", "token_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else _check_url(value)


class Source(_Strict):
    """Where a secret comes from: exactly one of an env var, a file, or a command."""

    env: str | None = None
    file: str | None = None
    command: list[str] | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        given = [name for name in ("env", "file", "command") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of env, file or command (got {given or 'none'})")
        if self.command is not None and not (self.command and self.command[0]):
            raise ValueError("command needs a program as its first word")
        return self


class Credential(Source):
    refresh_token: Source | None = None
    client_id: str | None = None
    client_secret_file: str | None = None


class AgentTable(_Strict):
    token_sha256: str | None = None
    token_file: str | None = None
    #: This agent's bound on connections to platforms (else `[gateway]`'s per-agent one).
    max_connections: Annotated[int, Field(ge=1, le=65_536)] | None = None
    credentials: dict[str, Credential] = Field(default_factory=dict)

    @field_validator("token_sha256")
    @classmethod
    def _hex(cls, value: str | None) -> str | None:
        if value is not None and not _HEX64.fullmatch(value.lower()):
            raise ValueError("expected 64 hex digits (the SHA-256 of the agent's bearer token)")
        return None if value is None else value.lower()

    @model_validator(mode="after")
    def _one_token(self) -> Self:
        if (self.token_sha256 is None) == (self.token_file is None):
            raise ValueError("give exactly one of token_sha256 or token_file")
        return self


#: A key prefix: printable and free of Redis Cluster's `{hash tag}` braces and of spaces.
_PREFIX = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")


def check_redis_url(value: str) -> str:
    """The store's URL (`store_url`), without a password: the password comes from an env var
    or a file. A URL that carries one is never repeated in the message."""
    parse_store_url(value)
    return value


def redis_address(url: str) -> str:
    """Where a checked URL points, as a message may show it."""
    return parse_store_url(url).where()


class SharedTable(_Strict):
    """`[shared]`: the Redis that replicas share their agents' breakers through."""

    url: str | None = None
    password_env: str | None = None
    password_file: str | None = None
    #: The sentinels' own password, where they have one (`redis+sentinel://` only).
    sentinel_password_env: str | None = None
    prefix: str = "breakerdeck"
    timeout_ms: Annotated[int, Field(ge=10, le=5000)] = 250

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else check_redis_url(value)

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if not _PREFIX.fullmatch(value):
            raise ValueError("1 to 64 letters, digits and '_.:-', starting with a letter or digit")
        return value

    @model_validator(mode="after")
    def _one_password(self) -> Self:
        if self.password_env is not None and self.password_file is not None:
            raise _Located(("password_file",), "give password_env or password_file, not both")
        return self


class GatewayConfig(_Strict):
    gateway: GatewayTable = Field(default_factory=GatewayTable)
    shared: SharedTable | None = None
    platforms: dict[str, PlatformTable] = Field(default_factory=dict)
    agents: dict[str, AgentTable] = Field(default_factory=dict)

    def deadline(self, platform: str, default: float = _DEADLINE) -> float:
        """The platform's deadline: its own, else `[gateway]`'s, else the policy's."""
        own = self.platforms[platform].deadline_seconds
        return own or self.gateway.deadline_seconds or default

    @model_validator(mode="after")
    def _names(self) -> Self:
        for name, platform_table in self.platforms.items():
            if not _PLATFORM_NAME.fullmatch(name):
                raise _Located(("platforms", name), "letters, digits, '_' and '-' only")
            if platform_table.probe_wait_seconds > self.deadline(name):
                raise _Located(
                    ("platforms", name, "probe_wait_seconds"),
                    f"at most the platform's deadline ({self.deadline(name):g} s)",
                )
        for agent, table in self.agents.items():
            if not _AGENT_NAME.fullmatch(agent):
                raise _Located(("agents", agent), "letters, digits and '_.@:-' only")
            for platform, credential in table.credentials.items():
                where = ("agents", agent, "credentials", platform)
                if platform not in self.platforms:
                    raise _Located(where, f"no [platforms.{platform}] table")
                has_token_url = self.platforms[platform].token_url is not None
                if credential.refresh_token is not None and not has_token_url:
                    raise _Located(
                        (*where, "refresh_token"), f"[platforms.{platform}] has no token_url"
                    )
        return self


class _Located(ValueError):
    """A cross-table problem, carrying the place it is about."""

    def __init__(self, where: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.where = where


def load(path: str | Path) -> tuple[GatewayConfig, dict[str, str]]:
    """The config, and each agent's token digest by agent (token files read now).

    Raises `ConfigError` naming the file, the table and the key of every problem found."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None
    try:
        config = GatewayConfig.model_validate(raw)
    except ValidationError as error:
        raise ConfigError("\n".join(_lines(path, error))) from None
    digests = _check_files(path, config)
    return config, digests


def _lines(path: Path, error: ValidationError) -> list[str]:
    lines = []
    for problem in error.errors():
        where = tuple(str(part) for part in problem["loc"])
        message = problem["msg"].removeprefix("Value error, ")
        context = problem.get("ctx", {}).get("error")
        if isinstance(context, _Located):
            where, message = (*where, *context.where), str(context)
        if problem["type"] == "extra_forbidden":
            message = "unknown key"
        lines.append(f"{path}: {_place(where)}: {message}")
    return lines


def _place(where: tuple[str, ...]) -> str:
    """`[agents.billing-assistant] key 'tokn_sha256'` from a location in the document."""
    if not where:
        return "(top level)"
    *table, key = where
    return f"[{'.'.join(table)}] key {key!r}" if table else f"table or key {key!r}"


def _check_files(path: Path, config: GatewayConfig) -> dict[str, str]:
    """Missing files, wrong owners or modes and missing programs are refused at start."""
    problems: list[str] = []
    digests: dict[str, str] = {}

    def private(where: tuple[str, ...], file: str) -> str | None:
        try:
            return statedir.read_private(resolve(path, file))
        except StateDirError as error:
            problems.append(f"{path}: {_place(where)}: {error}")
            return None

    for agent, table in config.agents.items():
        if table.token_sha256 is not None:
            digests[agent] = table.token_sha256
        elif table.token_file is not None:
            token = private(("agents", agent, "token_file"), table.token_file)
            if token is not None and token.strip():
                digests[agent] = _sha256(token.strip())
            elif token is not None:
                problems.append(f"{path}: {_place(('agents', agent, 'token_file'))}: empty file")
        for platform, credential in table.credentials.items():
            where = ("agents", agent, "credentials", platform)
            problems += _check_source(path, where, credential, private)
            if credential.refresh_token is not None:
                problems += _check_source(
                    path, (*where, "refresh_token"), credential.refresh_token, private
                )
            if credential.client_secret_file is not None:
                private((*where, "client_secret_file"), credential.client_secret_file)
    if problems:
        raise ConfigError("\n".join(problems))
    return digests


def _check_source(path: Path, where: tuple[str, ...], source: Source, private: Any) -> list[str]:
    if source.env is not None and source.env not in os.environ:
        return [f"{path}: {_place((*where, 'env'))}: ${source.env} is not set"]
    if source.file is not None:
        private((*where, "file"), source.file)
    if source.command is not None and shutil.which(source.command[0]) is None:
        return [f"{path}: {_place((*where, 'command'))}: no program {source.command[0]!r}"]
    return []


@dataclass(frozen=True, slots=True)
class Shared:
    """What the gateway hands the shared store: the URL, the password read at start, the prefix
    and the timeout in seconds."""

    url: str
    password: str | None = field(repr=False)
    prefix: str
    timeout: float
    sentinel_password: str | None = field(default=None, repr=False)


def shared_settings(
    path: str | Path, config: GatewayConfig, url: str | None = None
) -> Shared | None:
    """The shared store's settings, `url` (from `--shared`) winning over `[shared] url`, or None
    when neither names one. The password is read now, once: an unset variable or a file with the
    wrong owner or mode stops the start like any other secret in the file."""
    path = Path(path)
    table = config.shared or SharedTable()
    if url is not None:
        try:
            check_redis_url(url)
        except ValueError as error:
            raise ConfigError(f"gateway: --shared: {error}") from None
    url = url or table.url
    if url is None:
        if config.shared is not None:
            raise ConfigError(f"{path}: {_place(('shared', 'url'))}: needed (or --shared URL)")
        return None
    password = None
    if table.password_env is not None:
        password = os.environ.get(table.password_env)
        if not password:
            where = _place(("shared", "password_env"))
            raise ConfigError(f"{path}: {where}: ${table.password_env} is not set or empty")
    elif table.password_file is not None:
        where = _place(("shared", "password_file"))
        try:
            password = statedir.read_private(resolve(path, table.password_file)).strip()
        except StateDirError as error:
            raise ConfigError(f"{path}: {where}: {error}") from None
        if not password:
            raise ConfigError(f"{path}: {where}: empty file")
    sentinel_password = None
    if table.sentinel_password_env is not None:
        where = _place(("shared", "sentinel_password_env"))
        if parse_store_url(url).kind != "sentinel":
            raise ConfigError(f"{path}: {where}: only for a redis+sentinel:// URL")
        sentinel_password = os.environ.get(table.sentinel_password_env)
        if not sentinel_password:
            raise ConfigError(
                f"{path}: {where}: ${table.sentinel_password_env} is not set or empty"
            )
    return Shared(url, password, table.prefix, table.timeout_ms / 1000, sentinel_password)


def _sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
