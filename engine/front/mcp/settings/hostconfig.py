"""`breakerdeck mcp --from-host-config FILE --out DIR`: a host's `mcpServers` JSON (the format
Claude Desktop, Cursor and the Claude Agent SDK share) as the proxy's config, so that one
command puts a breaker in front of every server the host starts itself.

Every `env` value and the bearer of an HTTP server's headers goes to a private file of its own
(0600, in a 0700 dir, created fresh, never through a link, never over an existing file),
referenced by `secret_env` or the credential; a URL with a credential or a query string is
refused. A server's `args` are copied as they are: a secret passed on a command line is the
host config's own choice, and docs/mcp.md says to move it into `env` first. Only the host's
one new entry is printed (absolute paths); the original file still holds the secrets, and the
command says so. A server the proxy cannot wrap is named and left out; the others are written.
A stdio server whose program cannot be found here is written too (the host may yet install it)
but named with what to do: unnamed, its tools were missing on a first run and the model read
`no tool named '<server>__…'` as its own mistake.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

from breakerdeck.engine.errors import StateDirError
from breakerdeck.engine.front.mcp.settings.config import (
    ENV_NAME,
    RESERVED,
    SERVER_NAME,
    command_problem,
)
from breakerdeck.engine.storage import statedir
from breakerdeck.engine.text import counted, printable

CONFIG_NAME = "mcp.toml"
SECRETS = "secrets"
STATE = "state"
#: A host's file is read with this bound (they are a few kilobytes).
HOST_FILE_LIMIT = 1024 * 1024
#: Objects and arrays inside each other: a host's file nests four or five deep. Counted before
#: the parse, whose recursion a file nested 100,000 deep would exhaust.
MAX_NESTING = 64
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(r"[\[\]{}]")
KNOWN_KEYS = frozenset({"command", "args", "env", "cwd", "url", "headers", "type"})
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_BEARER = re.compile(r"Bearer\s+(\S+)\s*", re.IGNORECASE)


class HostConfigError(Exception):
    """The host's file as a whole cannot be converted (nothing is written)."""


@dataclass
class Converted:
    """What the conversion made: the config's text, the secret files to write, what was
    left out (each with why) and the names given to servers whose own were not usable."""

    tables: list[str] = field(default_factory=list)
    secrets: dict[str, str] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def strip_comments(text: str) -> str:
    """JSON with `//` and `/* */` comments (as some hosts accept) as plain JSON; strings are
    kept as they are."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == '"':
            end = i + 1
            while end < n and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            out.append(text[i : end + 1])
            i = end + 1
        elif text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i == -1 else i
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end == -1 else end + 2
        else:
            out.append(char)
            i += 1
    return "".join(out)


def nesting(text: str) -> int:
    """How deep JSON's objects and arrays go in `text`, brackets inside strings not counted
    (a malformed text gets some number; the parse then says what is wrong with it)."""
    depth = deepest = 0
    for bracket in _BRACKET.finditer(_STRING.sub("", text)):
        depth += 1 if bracket.group() in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def read_host_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            data = handle.read(HOST_FILE_LIMIT + 1)
    except OSError as error:
        raise HostConfigError(f"{path}: {error.strerror or error}") from None
    if len(data) > HOST_FILE_LIMIT:
        raise HostConfigError(f"{path}: over {HOST_FILE_LIMIT} bytes; not a host's config")
    try:
        text = strip_comments(data.decode("utf-8"))
        if nesting(text) > MAX_NESTING:
            raise HostConfigError(f"{path}: nested over {MAX_NESTING} deep; not a host's config")
        document = json.loads(text)
    except (UnicodeDecodeError, ValueError) as error:
        raise HostConfigError(f"{path}: not JSON ({printable(str(error))[:200]})") from None
    servers = document.get("mcpServers") if isinstance(document, dict) else None
    if not isinstance(servers, dict):
        raise HostConfigError(f'{path}: no "mcpServers" object')
    return servers


def convert(servers: dict[str, Any], host_file: Path, out: Path) -> Converted:
    """Each host entry as a `[servers.<name>]` table, its secrets as files under `out`."""
    done = Converted(tables=[_proxy_table()])
    taken: set[str] = set()
    for given, entry in servers.items():
        shown = printable(str(given))[:80]
        name = re.sub(r"[^A-Za-z0-9-]", "-", str(given))[:40].strip("-")
        problem = _problem(name, entry, taken)
        if problem is not None:
            done.left_out.append(f"{shown}: {problem}")
            continue
        if name != given:
            done.notes.append(f"{shown}: named {name} (letters, digits and '-' only)")
        taken.add(name)
        lines = [f"[servers.{name}]"]
        if "url" in entry:
            lines += _http(name, entry, out, done)
        else:
            lines += _stdio(name, entry, host_file, out, done)
        done.tables.append("\n".join(lines))
    return done


def _proxy_table() -> str:
    return (
        "# Written by `breakerdeck mcp --from-host-config`; docs/mcp.md describes each key.\n"
        f"[proxy]\nstate_dir = {_toml(STATE)}"
    )


def _problem(name: str, entry: Any, taken: set[str]) -> str | None:
    """Why this entry cannot be wrapped, or None."""
    if not isinstance(entry, dict):
        return "not an object"
    if unknown := sorted(set(entry) - KNOWN_KEYS):
        return f"unknown key {printable(unknown[0])[:40]!r}: left out rather than half wrapped"
    if not SERVER_NAME.fullmatch(name) or name == RESERVED or name in taken:
        return "its name cannot be made a server name of its own"
    kind = entry.get("type")
    if "url" in entry:
        return _http_problem(entry, kind)
    if kind not in (None, "stdio"):
        return f"type {printable(str(kind))[:20]!r} is not one the proxy speaks"
    command, args = entry.get("command"), entry.get("args", [])
    if not isinstance(command, str) or not command:
        return "no command"
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return "args: not a list of strings"
    env = entry.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        return "env: not an object of strings"
    if bad := [k for k in env if not ENV_NAME.fullmatch(str(k))]:
        return f"env: {printable(str(bad[0]))[:40]!r} is not a variable's name"
    if "cwd" in entry and not isinstance(entry["cwd"], str):
        return "cwd: not a string"
    return None


def _http_problem(entry: dict[str, Any], kind: Any) -> str | None:
    if kind not in (None, "http", "streamable-http", "streamableHttp"):
        return f"type {printable(str(kind))[:20]!r}: the proxy speaks streamable HTTP only"
    url = entry["url"]
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        return "url: not an http(s) URL"
    if parts.username or parts.password:
        return "url: carries a credential"
    if parts.query or parts.fragment:
        return "url: carries a query string, where a key often is (put it in a header)"
    headers = entry.get("headers", {})
    if not isinstance(headers, dict):
        return "headers: not an object"
    for header, value in headers.items():
        if str(header).lower() != "authorization" or not isinstance(value, str):
            return f"header {printable(str(header))[:40]!r}: only Authorization: Bearer is sent"
        if not _BEARER.fullmatch(value):
            return "header 'Authorization': only a Bearer token is sent"
    return None


def _stdio(
    name: str, entry: dict[str, Any], host_file: Path, out: Path, done: Converted
) -> list[str]:
    program = entry["command"]
    if os.sep in program and not os.path.isabs(program):
        program = str((host_file.parent / program).resolve())
    lines = [f"command = {_toml([program, *entry.get('args', [])])}"]
    if problem := command_problem([program]):
        done.missing.append(f"{printable(name)}: {printable(problem)}")
    secrets = []
    for var, value in entry.get("env", {}).items():
        file = out / SECRETS / f"{name}.{var}"
        done.secrets[str(file)] = value
        secrets.append(f"{var} = {{ file = {_toml(str(file))} }}")
    if secrets:
        lines.append(f"secret_env = {{ {', '.join(secrets)} }}")
    if "cwd" in entry:
        lines.append(f"cwd = {_toml(str((host_file.parent / entry['cwd']).resolve()))}")
    return lines


def _http(name: str, entry: dict[str, Any], out: Path, done: Converted) -> list[str]:
    lines = [f"url = {_toml(entry['url'])}"]
    for value in entry.get("headers", {}).values():
        bearer = _BEARER.fullmatch(value)
        assert bearer is not None
        file = out / SECRETS / f"{name}.credential"
        done.secrets[str(file)] = bearer.group(1)
        lines.append(f"credential = {{ file = {_toml(str(file))} }}")
    return lines


def _toml(value: Any) -> str:
    """A TOML string or array of strings: JSON's string escapes are TOML's too."""
    return json.dumps(value, ensure_ascii=False)


def write(out: Path, converted: Converted) -> Path:
    """The config and its secret files, each created fresh and private; nothing is written
    when any of them is already there."""
    config = out / CONFIG_NAME
    targets = [config, *map(Path, converted.secrets)]
    try:
        statedir.prepare(out)
        if converted.secrets:
            statedir.prepare(out / SECRETS)
    except StateDirError as error:
        raise HostConfigError(str(error)) from None
    if present := [t for t in targets if os.path.lexists(t)]:
        raise HostConfigError(f"{present[0]} is already there: --out needs a fresh dir")
    files = [(Path(file), value + "\n") for file, value in converted.secrets.items()]
    files.append((config, "\n\n".join(converted.tables) + "\n"))
    made: list[Path] = []
    try:
        for path, text in files:
            _create(path, text, made)
    except HostConfigError:
        # A full disk half-way: what this run wrote goes, so a rerun finds the dir as it was.
        for path in made:
            path.unlink(missing_ok=True)
        raise
    return config


def _create(path: Path, text: str, made: list[Path]) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
    except OSError as error:
        raise HostConfigError(f"{path}: {error.strerror or error}") from None
    made.append(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as error:
        raise HostConfigError(f"{path}: {error.strerror or error}") from None


def host_entry(config: Path) -> dict[str, Any]:
    """The host's one entry for the proxy, with absolute paths."""
    args = ["mcp", "--config", str(config.resolve())]
    found = shutil.which("breakerdeck")
    if found is not None:
        return {"command": str(Path(found).resolve()), "args": args}
    return {"command": sys.executable, "args": ["-m", "breakerdeck.console.cli", *args]}


def from_host_config(host_file: Path, out: Path, *, stdout: TextIO, stderr: TextIO) -> int:
    """The whole command: 0 when the config was written, 2 when nothing could be."""

    def say(line: str) -> None:
        print(f"breakerdeck mcp: {line}", file=stderr, flush=True)

    out = Path(os.path.abspath(out))  # absolute, links left as they are (prepare checks them)
    try:
        converted = convert(read_host_file(host_file), host_file, out)
        if len(converted.tables) == 1:
            for line in converted.left_out:
                say(f"left out: {line}")
            raise HostConfigError(f"{host_file}: no server the proxy can wrap")
        config = write(out, converted)
    except HostConfigError as error:
        say(str(error))
        return 2
    for line in converted.notes:
        say(line)
    for line in converted.left_out:
        say(f"left out: {line}")
    for line in converted.missing:
        say(
            f"warning: {line}: written, but its tools stay missing until it starts; install it, "
            f"or give its full path in {out / CONFIG_NAME}, then check with "
            f"`breakerdeck mcp --config {out / CONFIG_NAME} --check-config`"
        )
    say(f"wrote {config} ({counted(len(converted.tables) - 1, 'server')}); the host's entry:")
    entry = {"mcpServers": {RESERVED: host_entry(config)}}
    print(json.dumps(entry, indent=2), file=stdout, flush=True)
    say(
        f"{host_file} still holds the secrets in clear: once the host uses this entry, "
        "remove its old entries (the values now live in private files under "
        f"{out / SECRETS})"
    )
    return 0
