"""`e`: the selected breaker's incident (`console.incident`) out of the console, in every console
that shows cards (live, web, replay).

In a terminal both documents are written as `<key>-<hash>-<UTC time>.md` and `.json` into
`--export-dir` (default: the working directory), both paths are said in a notice, and the
Markdown is copied to the terminal's clipboard (OSC 52, Textual's `copy_to_clipboard`: a
terminal that does not allow it ignores it). In a browser (`breakerdeck web`) they are offered as
downloads (Textual's `deliver_text`), and nothing is written on the server unless
`--export-dir` was given. A full disk or a directory that cannot be written is a notice; the
console goes on.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import App

from breakerdeck.console.card import Card
from breakerdeck.console.incident import EXPORT_ROWS, as_json, incident, markdown

if TYPE_CHECKING:
    from breakerdeck.console.board import Board
    from breakerdeck.console.source import Source

#: The key's part of a file name: these characters kept, the rest as `_`, at most this long.
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
KEY_CHARS = 100
#: What `e` does, for the palette and the bindings' tooltips.
EXPORT_TIP = "the incident as Markdown and JSON"
#: Markdown larger than this is not sent over OSC 52 (terminals cap what they take, some near
#: 100 kB of base64, and a larger write can stall a slow link).
CLIPBOARD_LIMIT = 64 * 1024


class ExportError(Exception):
    """The files could not be written (said in the operator's words)."""


def export_stem(key: str, at: float) -> str:
    """`billing-assistant-3f2a9c1b-20260102T030405Z`: the key with every unsafe character as
    `_` (a leading dot too: no hidden file), cut to 100, then 8 hex of the key's hash (two keys
    that read alike after that still differ) and the UTC time."""
    safe = _UNSAFE.sub("_", key)[:KEY_CHARS]
    safe = "_" + safe[1:] if safe.startswith(".") else safe
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(at))
    return f"{safe}-{digest}-{stamp}"


def write_export(directory: Path, stem: str, documents: dict[str, str]) -> list[Path]:
    """Each document as `<stem><suffix>`, created new (an export never overwrites one: a second
    in the same second gets `-2`); raises `ExportError` naming the directory and why."""
    for n in range(1, 100):
        name = stem if n == 1 else f"{stem}-{n}"
        paths = [directory / f"{name}{suffix}" for suffix in documents]
        if not any(os.path.lexists(path) for path in paths):
            break
    written: list[Path] = []
    try:
        for path, text in zip(paths, documents.values(), strict=True):
            with open(path, "x", encoding="utf-8") as out:
                out.write(text)
            written.append(path)
    except OSError as error:
        for path in written:  # half an export is not one
            path.unlink(missing_ok=True)
        why = error.strerror or str(error)
        raise ExportError(f"cannot write the export into {directory}: {why}") from error
    return written


class Exports(App[None]):
    """The export workflow; the state it reads is set up by `BreakerdeckApp`: the source and
    board are the tab shown's (`OperatorActions`), so `e` exports from the context on screen."""

    #: Where `e` writes (None: the working directory in a terminal, nothing on a web server).
    export_dir: Path | None

    if TYPE_CHECKING:

        @property
        def source(self) -> Source: ...

        @property
        def board(self) -> Board: ...

        def now_for(self, ident: str) -> float: ...

    async def export(self, card: Card) -> None:
        fresh = self.board.card(card.ident) or card
        rows = await self.source.audit(fresh.id, EXPORT_ROWS)
        exported_at = time.time()
        document = incident(
            fresh,
            rows,
            limits=fresh.limits or self.board.thresholds,
            now=self.now_for(fresh.id),
            exported_at=exported_at,
            source=self.source.label,
            url=self.source.feed_url(fresh.id),
            note=self.source.audit_note(fresh.id),
            approximate=self.source.approximate_counts,
        )
        stem = export_stem(fresh.key, exported_at)
        documents = {".md": markdown(document), ".json": as_json(document)}
        said = []
        if self.is_web:
            for suffix, text in documents.items():
                self.deliver_text(io.StringIO(text), save_filename=stem + suffix)
            said.append("downloading it as .md and .json")
        if not self.is_web or self.export_dir is not None:
            try:
                paths = write_export(self.export_dir or Path.cwd(), stem, documents)
            except ExportError as error:
                self.notify(f"Not exported: {error}", severity="error", timeout=10)
                return
            said.append("written to " + " and ".join(str(path) for path in paths))
        if not self.is_web:
            if len(documents[".md"]) <= CLIPBOARD_LIMIT:
                self.copy_to_clipboard(documents[".md"])
                said.append("the Markdown copied to the clipboard (OSC 52)")
            else:
                said.append("too large for the clipboard")
        partial = " (its audit rows are partial)" if document.partial else ""
        self.notify(f"Exported {fresh.key}{partial}: {'; '.join(said)}.", timeout=10)
