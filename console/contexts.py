"""`contexts.toml` and `views.toml`: the deployments a console can watch, and the filters an
operator keeps.

Both live in `config_dir()` (`$XDG_CONFIG_HOME/breakerdeck/`, else `~/.config/breakerdeck/`),
`views.toml` beside `contexts.toml` wherever `--contexts FILE` puts that one:

    [contexts.prod]
    urls = ["ws://gw-1:8765", "ws://gw-2:8765"]   # replicas of one deployment are one context
    token_file = "prod-operator.token"            # relative to the file
    read_only = true
    color = "red"                                 # optional

    [views.billing]
    filter = "agent:billing* state:open"

A context names the feeds to read and whether the console may write to them, so whoever can
change the file chooses where the operator's resets go: a file another user owns, one the group
or the world can write, or one that is not a regular file is refused, naming the file. An
unknown key is refused too (a mistyped `read-only = true` must not leave prod writable).
Names, URLs and filters are outside text: whoever shows them escapes them.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, TypeVar
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from rich.color import Color, ColorParseError

from breakerdeck.engine.errors import StateDirError
from breakerdeck.engine.front.paths import resolve
from breakerdeck.engine.storage import statedir

CONTEXTS_FILE = "contexts.toml"
VIEWS_FILE = "views.toml"
#: A context's or a view's name, at most: it is shown in a header and a tab.
MAX_NAME = 64
#: A view's filter, at most (the `/` box holds one line).
MAX_FILTER = 500
#: Either file, at most: a few hundred contexts fit in far less.
MAX_BYTES = 256 * 1024

#: The views every console has; `views.toml` may redefine them. A view is a filter string, in
#: the `/` filter's grammar.
BUILTIN_VIEWS = {
    "open": "state:open",
    "held": "state:held",
    "probing": "state:half-open",
}


class ConfigError(Exception):
    """A file that cannot be used: the message names it and says why."""


class UnknownName(LookupError):
    """A context or view the file does not define: the message names the known ones."""


@dataclass(frozen=True, slots=True)
class Context:
    name: str
    urls: tuple[str, ...]
    #: Resolved against the file's folder; None: `watch`'s default token.
    token_file: Path | None = None
    read_only: bool = False
    #: A Rich colour ("red", "#ff8800"), checked when the file is read.
    color: str | None = None


@dataclass(frozen=True, slots=True)
class View:
    name: str
    filter: str
    builtin: bool = False


def feed_url(text: str) -> str:
    """A ws:// or wss:// URL with a host (and a valid port if one is given): the rule for a URL
    typed after `watch` and one in `contexts.toml`."""
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError on a port out of range
    except ValueError as error:
        raise ValueError(f"not a feed URL: {text!r} ({error})") from None
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        raise ValueError(f"not a feed URL: {text!r}; expected ws://host:port (or wss://)")
    return text


def _colour(text: str | None) -> str | None:
    if text is not None:
        try:
            Color.parse(text)
        except ColorParseError:
            raise ValueError(f"not a colour: {text!r} (a name such as red, or #rrggbb)") from None
    return text


Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _ContextTable(_Strict):
    urls: Annotated[list[Annotated[str, AfterValidator(feed_url)]], Field(min_length=1)]
    token_file: str | None = None
    read_only: bool = False
    color: Annotated[str | None, AfterValidator(_colour)] = None


class _ContextsFile(_Strict):
    contexts: dict[Name, _ContextTable] = Field(default_factory=dict)


class _ViewTable(_Strict):
    filter: Annotated[str, Field(max_length=MAX_FILTER)]


class _ViewsFile(_Strict):
    views: dict[Name, _ViewTable] = Field(default_factory=dict)


def config_dir() -> Path:
    """Where the console's own files live: `$XDG_CONFIG_HOME/breakerdeck/` (an absolute one,
    as the XDG spec asks), else `~/.config/breakerdeck/`."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    root = Path(base) if os.path.isabs(base) else Path.home() / ".config"
    return root / "breakerdeck"


def contexts_path(given: str | Path | None = None) -> Path:
    """`--contexts FILE`, else `contexts.toml` in `config_dir()`."""
    return Path(given).expanduser() if given else config_dir() / CONTEXTS_FILE


def views_path(contexts: str | Path | None = None) -> Path:
    """`views.toml`, beside the contexts file in use."""
    return contexts_path(contexts).parent / VIEWS_FILE


def load_contexts(path: str | Path | None = None) -> dict[str, Context]:
    """The contexts `path` (default: `contexts_path()`) defines, in the file's order. A missing
    file is a `ConfigError` too: whoever asks for contexts means to use one."""
    where = contexts_path(path)
    text = _read(where)
    if text is None:
        raise ConfigError(f"{where}: no such file (docs/console.md shows its shape)")
    parsed = _parse(where, text, _ContextsFile)
    return {
        name: Context(
            name,
            tuple(table.urls),
            resolve(where, table.token_file) if table.token_file else None,
            table.read_only,
            table.color,
        )
        for name, table in parsed.contexts.items()
    }


def load_views(path: str | Path | None = None) -> dict[str, View]:
    """The built-in views, then those `path` (default: `views_path()`) defines, which may
    redefine a built-in one. No file: the built-in ones."""
    where = Path(path).expanduser() if path else views_path()
    views = builtin_views()
    text = _read(where)
    if text is not None:
        parsed = _parse(where, text, _ViewsFile)
        views.update({name: View(name, table.filter) for name, table in parsed.views.items()})
    return views


def views_for(view: str | None, contexts: str | Path | None = None) -> tuple[dict[str, View], str]:
    """A console's saved views (for its palette) and the filter `--view` names ("" without
    it). `views.toml` is read beside the contexts file in use, whether `--view` is given or
    not: a bad one is refused either way, as a bad `contexts.toml` is."""
    where = views_path(contexts)
    views = load_views(where)
    if view is None:
        return views, ""
    [picked] = chosen(views, [view], "view", where)
    return views, picked.filter


def builtin_views() -> dict[str, View]:
    return {name: View(name, text, builtin=True) for name, text in BUILTIN_VIEWS.items()}


T = TypeVar("T")


def chosen(known: Mapping[str, T], names: Sequence[str], what: str, where: Path) -> list[T]:
    """`names` looked up in `known`, in the order given, each once. The first unknown one is an
    `UnknownName` that names the file and what it does define."""
    picked: dict[str, T] = {}
    for name in names:
        if name not in known:
            near = difflib.get_close_matches(name, list(known), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            listed = ", ".join(known) or "none"
            raise UnknownName(f"no {what} {name!r} in {where}{hint} (known: {listed})")
        picked.setdefault(name, known[name])
    return list(picked.values())


def _read(path: Path) -> str | None:
    """The file's text (None: there is no such file), if no other user could have written it
    (see the module's docstring; `statedir.read_config` says how)."""
    try:
        return statedir.read_config(path, MAX_BYTES)
    except StateDirError as error:
        if isinstance(error.__cause__, FileNotFoundError):
            return None
        raise ConfigError(f"refused: {error}") from None


M = TypeVar("M", bound=BaseModel)


def _parse(path: Path, text: str, model: type[M]) -> M:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None
    try:
        return model.model_validate(raw)
    except ValidationError as error:
        raise ConfigError(_problems(path, error)) from None


def _problems(path: Path, error: ValidationError) -> str:
    """Each problem on a line of its own: the file, the table and key, what is wrong."""
    lines = []
    for problem in error.errors():
        *table, key = [str(part) for part in problem["loc"]] or ["(top level)"]
        place = f"[{'.'.join(table)}] key {key!r}" if table else f"key {key!r}"
        if problem["type"] == "extra_forbidden":
            message = "unknown key"
        else:
            message = problem["msg"].removeprefix("Value error, ")
        lines.append(f"{path}: {place}: {message}")
    return "\n".join(lines)
