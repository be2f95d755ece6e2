"""`breakerdeck mcp`'s config file (DESIGN, "`breakerdeck mcp`"): strict, checked at start.

A typo must never start a proxy that silently ignores it: unknown keys, wrong types, missing
files, credential files others could write and bad URLs are refused with one message naming
the file, the table and the key (`ConfigError`), which the command prints before exiting 2.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from breakerdeck.engine.errors import BreakerdeckError, StateDirError
from breakerdeck.engine.front.options import DoorTable
from breakerdeck.engine.front.paths import resolve
from breakerdeck.engine.storage import statedir
from breakerdeck.engine.text import printable

#: `<server>__<tool>` may be at most this long: hosts refuse longer tool names.
MAX_TOOL_NAME = 64
SEPARATOR = "__"
SERVER_NAME = re.compile(r"[A-Za-z0-9-]{1,40}")
#: An upstream tool name we can relay: what hosts accept after our prefix.
TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]+")
CREDENTIAL_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Starting a stdio upstream and its handshake: real seconds, never sped up (DESIGN).
START_DEADLINE_SECONDS = 10.0
MAX_ATTEMPTS = 10
#: The proxy's own tools are `breakerdeck__…`: no upstream may take the name.
RESERVED = "breakerdeck"


class ConfigError(BreakerdeckError):
    """A config the proxy refuses to start with; the message names file, table and key."""

    def __init__(self, path: Path, table: str, key: str, problem: str) -> None:
        self.path, self.table, self.key, self.problem = path, table, key, problem
        where = f"[{table}] " if table else ""
        super().__init__(f"{path}: {where}{key}: {printable(problem)}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Source(_Strict):
    """Where a secret comes from: an env var of the proxy's, a private file, or a command."""

    env: str | None = None
    file: str | None = None
    command: list[str] | None = None

    @model_validator(mode="after")
    def _one_source(self) -> Source:
        given = [s for s in ("env", "file", "command") if getattr(self, s) is not None]
        if len(given) != 1:
            raise ValueError("env: give exactly one of env, file or command")
        if self.command is not None and not self.command:
            raise ValueError("command: must name a program")
        return self

    @property
    def source(self) -> Literal["env", "file", "command"]:
        if self.env is not None:
            return "env"
        return "file" if self.file is not None else "command"


class Credential(Source):
    """A server's credential: its source, and the id its breaker key carries."""

    id: str = "default"
    #: The env var a stdio server reads the credential from.
    name: str | None = None

    @model_validator(mode="after")
    def _id_and_name(self) -> Credential:
        if not CREDENTIAL_ID.fullmatch(self.id):
            raise ValueError("id: letters, digits, '_', '.' and '-' only (at most 64)")
        if self.name is not None and not ENV_NAME.fullmatch(self.name):
            raise ValueError("name: must be an environment variable's name")
        return self


class ServerConfig(_Strict):
    command: list[str] | None = None
    url: str | None = None
    credential: Credential | None = None
    deadline_seconds: float = 30.0
    attempts: int = 2
    backoff_seconds: float = 1.0
    probe_wait_seconds: float = 0.0
    count_is_error: list[str] = Field(default_factory=list)
    #: A stdio server's environment beyond the SDK's default one: plain values, then secrets
    #: read at each start (`secret_env`), then its credential, which wins.
    env: dict[str, str] = Field(default_factory=dict)
    secret_env: dict[str, Source] = Field(default_factory=dict)
    #: A stdio server's working directory (beside the config when relative).
    cwd: str | None = None

    @field_validator("deadline_seconds", "backoff_seconds", "probe_wait_seconds", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        # TOML writes `30` as an integer; strict mode would refuse it for a float field.
        if isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("command: give exactly one of command (a stdio server) or url (HTTP)")
        if self.command is not None and not self.command:
            raise ValueError("command: must name a program")
        if not (math.isfinite(self.deadline_seconds) and self.deadline_seconds > 0):
            raise ValueError("deadline_seconds: must be positive")
        if not 1 <= self.attempts <= MAX_ATTEMPTS:
            raise ValueError(f"attempts: must be 1 to {MAX_ATTEMPTS}")
        if not (math.isfinite(self.backoff_seconds) and self.backoff_seconds >= 0):
            raise ValueError("backoff_seconds: must be 0 or more")
        if not 0 <= self.probe_wait_seconds <= self.deadline_seconds:
            raise ValueError("probe_wait_seconds: must be 0 to deadline_seconds")
        if self.url is not None:
            for key in ("env", "secret_env", "cwd"):
                if getattr(self, key):
                    raise ValueError(f"{key}: only a stdio server (command) takes it")
        for name in [*self.env, *self.secret_env]:
            if not ENV_NAME.fullmatch(name):
                raise ValueError(f"env: {name!r} is not an environment variable's name")
        return self

    @property
    def credential_id(self) -> str:
        return self.credential.id if self.credential is not None else "default"

    @property
    def lease(self) -> float:
        """The whole retry budget, as the `tool` policy's probe lease."""
        return self.attempts * self.deadline_seconds + (self.attempts - 1) * self.backoff_seconds


class ProxySection(_Strict, DoorTable):
    """`[proxy]`: the keys every door reads alike (`DoorTable`), what a stranger may cost
    `--http` before its token is read (`StrangerBounds`, the gateway's keys) and the sessions
    hosts may hold open."""

    #: Opt in to a first description line beginning `Unavailable` while a server is out (each
    #: transition then changes the list, and busts the host's prompt cache: docs/mcp.md).
    annotate_unavailable: bool = False
    #: Opt in to the read-only `breakerdeck__status` tool.
    status_tool: bool = False
    #: `--http`: sessions kept at once (a new one beyond is refused 503), and how long one
    #: with no request in flight is kept (the SDK's 30 minutes).
    max_sessions: Annotated[int, Field(ge=1, le=100_000)] = 256
    session_idle_seconds: Annotated[float, Field(gt=0, le=86_400)] = 1800.0


class ProxyConfig(_Strict):
    proxy: ProxySection = Field(default_factory=ProxySection)
    servers: dict[str, ServerConfig]


def load(path: str | Path) -> ProxyConfig:
    """Read and check the whole file; the first problem found is a `ConfigError`."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(path, "", "file", "no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(path, "", "file", str(error)) from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(path, "", "syntax", str(error)) from None
    try:
        config = ProxyConfig.model_validate(raw)
    except ValidationError as error:
        raise _named(path, error) from None
    _check(path, config)
    return _placed(path, config)


def _placed(path: Path, config: ProxyConfig) -> ProxyConfig:
    """Paths in the file are beside the file: a relative program path (a first word with a
    separator; a bare name is looked up on PATH), `cwd` and secret files."""
    servers = {}
    for name, server in config.servers.items():
        update: dict[str, Any] = {}
        if server.command is not None and os.sep in server.command[0]:
            update["command"] = [str(resolve(path, server.command[0])), *server.command[1:]]
        if server.cwd is not None:
            update["cwd"] = str(resolve(path, server.cwd))
        secrets = {
            var: source.model_copy(update={"file": str(resolve(path, source.file))})
            for var, source in server.secret_env.items()
            if source.file is not None
        }
        if secrets:
            update["secret_env"] = {**server.secret_env, **secrets}
        servers[name] = server.model_copy(update=update) if update else server
    return config.model_copy(update={"servers": servers})


_KEYED = re.compile(r"([a-z_]+): (.*)", re.DOTALL)


def _named(path: Path, error: ValidationError) -> ConfigError:
    """The first problem, placed as a reader of the file sees it: `[table] key`."""
    first = error.errors()[0]
    loc = [str(part) for part in first["loc"]]
    problem = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
    problem = problem.removeprefix("Value error, ")
    named = _KEYED.fullmatch(problem)
    if named is not None:  # a check across a table's keys says which key it is about
        loc, problem = [*loc, named[1]], named[2]
    if len(loc) <= 1:
        return ConfigError(path, "", loc[0] if loc else "servers", problem)
    if loc[0] != "servers":
        return ConfigError(path, loc[0], ".".join(loc[1:]), problem)
    if len(loc) == 2:
        return ConfigError(path, "servers", loc[1], problem)
    if loc[2] == "credential" and len(loc) > 3:
        return ConfigError(path, f"servers.{loc[1]}.credential", loc[3], problem)
    return ConfigError(path, f"servers.{loc[1]}", ".".join(loc[2:]), problem)


def _check(path: Path, config: ProxyConfig) -> None:
    if not config.servers:
        raise ConfigError(path, "", "servers", "name at least one server")
    for name, server in config.servers.items():
        table = f"servers.{name}"
        if not SERVER_NAME.fullmatch(name):
            raise ConfigError(path, "servers", name, "letters, digits and '-' only (at most 40)")
        if name == RESERVED:
            raise ConfigError(path, "servers", name, "reserved for the proxy's own tools")
        if server.url is not None:
            _check_url(path, table, server.url)
        for number, pattern in enumerate(server.count_is_error):
            try:
                re.compile(pattern)
            except re.error as error:
                raise ConfigError(path, table, f"count_is_error[{number}]", str(error)) from None
        if server.credential is not None:
            _check_credential(path, table, server)
        for var, source in server.secret_env.items():
            file = resolve(path, source.file or "")
            _check_source(path, f"{table}.secret_env.{var}", source, file)
        if server.cwd is not None and not resolve(path, server.cwd).is_dir():
            raise ConfigError(path, table, "cwd", f"{server.cwd!r} is not a directory")


def _check_url(path: Path, table: str, url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(path, table, "url", f"not an http(s) URL: {url!r}")
    if parts.username or parts.password:
        raise ConfigError(path, table, "url", "put the credential in `credential`, not the URL")


def _check_credential(path: Path, table: str, server: ServerConfig) -> None:
    credential = server.credential
    assert credential is not None
    where = f"{table}.credential"
    if server.command is not None and credential.name is None and credential.env is None:
        raise ConfigError(path, where, "name", "a stdio server needs the env var to read it from")
    _check_source(path, where, credential, Path(credential.file or ""))


def _check_source(path: Path, where: str, source: Source, file: Path) -> None:
    """An env var that is set, a private file that is there; a command is run at start."""
    if source.env is not None and source.env not in os.environ:
        raise ConfigError(path, where, "env", f"environment variable {source.env} is not set")
    if source.file is not None:
        try:
            statedir.read_private(file)
        except StateDirError as error:
            raise ConfigError(path, where, "file", str(error)) from None


def command_problem(command: list[str]) -> str | None:
    """Why a stdio server's command cannot start, or None. Its program is looked up as the
    start looks it up: a name on PATH, or a path (with a '/') to an executable file."""
    program = command[0]
    if shutil.which(program) is not None:
        return None
    if os.sep in program:
        return f"{program!r} is not an executable file"
    return f"{program!r} not found on PATH"


def check_commands(path: str | Path, config: ProxyConfig) -> None:
    """`--check-config` only: a stdio server whose program is missing is refused, naming it.
    At run time the same server is reported and the others are served."""
    for name, server in config.servers.items():
        if server.command is not None and (problem := command_problem(server.command)):
            raise ConfigError(Path(path), f"servers.{name}", "command", problem)
