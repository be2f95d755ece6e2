"""Each upstream's last `tools/list`, kept in the state dir so that a server that is down, slow
to start or failing its start is still listed (DESIGN: the tool list is stable).

A model that cannot see a tool improvises around the gap; one that sees it and gets a
`circuit_open` result tells the user. So the list a server last gave is kept (names, schemas,
annotations, as the wire carries them) in `tools/<server>.json` under the state dir's root,
shared by every `instances/<n>` of that dir, and refreshed whenever the server answers. The
files are the state dir's like any other: written atomically and privately, read back never
through a link and with a bound; a damaged or planted one is moved aside and reported, and the
server is listed again once it answers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import mcp_types as types
from pydantic import ValidationError

from breakerdeck.engine.errors import StateDirError
from breakerdeck.engine.storage import statedir
from breakerdeck.engine.storage.store import set_aside
from breakerdeck.engine.text import printable

LISTS_DIR = "tools"
#: A stored list is read back with this bound (schemas can be large; 1,000 tools fit).
LIST_LIMIT_BYTES = 8 * 1024 * 1024
FORMAT = 1


def wire_form(tool: types.Tool) -> dict[str, Any]:
    """A tool as the host's `tools/list` carries it: what "the list changed" compares."""
    return tool.model_dump(mode="json", by_alias=True, exclude_none=True)


def same(left: Iterable[types.Tool], right: Iterable[types.Tool]) -> bool:
    return [wire_form(t) for t in left] == [wire_form(t) for t in right]


class StoredLists:
    """The state dir's stored lists (none without a state dir); problems are said once each."""

    def __init__(self, state_dir: Path | None) -> None:
        self.directory = None if state_dir is None else state_dir / LISTS_DIR
        self.problems: list[str] = []

    def _path(self, server: str) -> Path:
        assert self.directory is not None
        return self.directory / f"{server}.json"

    def load(self, server: str) -> list[types.Tool] | None:
        """The server's last list, or None: never stored, or moved aside as unusable."""
        if self.directory is None:
            return None
        path = self._path(server)
        try:
            data = json.loads(statedir.read_own(path, LIST_LIMIT_BYTES))
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError("not a stored tool list")
            return [types.Tool.model_validate(tool, by_name=False) for tool in data["tools"]]
        except StateDirError as error:
            if isinstance(error.__cause__, FileNotFoundError):
                return None
            self._aside(path, server, str(error))
        except (ValueError, KeyError, TypeError, ValidationError) as error:
            self._aside(path, server, type(error).__name__)
        return None

    def _aside(self, path: Path, server: str, why: str) -> None:
        try:
            where = f"moved to {set_aside(path)}"
        except OSError as error:
            where = f"could not be moved aside ({error.strerror or error})"
        self.problems.append(
            f"{server}: its stored tool list {path} is unusable ({printable(why)[:200]}); "
            f"{where}, and the server is listed once it answers"
        )

    def save(self, server: str, tools: Iterable[types.Tool]) -> str | None:
        """Keep `tools` as the server's last list; the problem, if the disk refused it."""
        if self.directory is None:
            return None
        document = {"format": FORMAT, "server": server, "tools": [wire_form(t) for t in tools]}
        try:
            statedir.prepare(self.directory)
            statedir.write_private(self._path(server), json.dumps(document, indent=1) + "\n")
        except (OSError, StateDirError) as error:
            return f"{server}: its tool list could not be stored ({error})"
        return None
