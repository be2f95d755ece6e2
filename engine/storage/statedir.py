"""The state dir and the private files in it, opened as if another user were hostile.

A state dir in a shared place (/tmp, a world-writable volume) lets another user plant a
symlink where we write (a root `serve` would overwrite the file it points to) or a token file
we would trust. So the dir must be ours and not writable by others, and every file in it is
opened without following symlinks.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path
from typing import BinaryIO

from breakerdeck.engine.errors import StateDirError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def prepare(directory: str | Path) -> Path:
    """Create the state dir (mode 0700) or check the one there: a real dir, ours, private."""
    path = Path(directory)
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.lstat()
    except OSError as error:
        raise StateDirError(f"state dir {path}: {error.strerror or error}") from error
    if not stat.S_ISDIR(info.st_mode):
        raise StateDirError(f"state dir {path} is not a directory (a symlink or a file is there)")
    _check_owner(path, info, "state dir")
    return path


def _check_owner(path: Path, info: os.stat_result, what: str, *, root_ok: bool = False) -> None:
    if info.st_uid != os.geteuid() and not (root_ok and info.st_uid == 0):
        raise StateDirError(
            f"{what} {path} belongs to uid {info.st_uid}, not to this user ({os.geteuid()})"
            " or root: use one of your own"
        )
    if info.st_mode & 0o022:
        raise StateDirError(
            f"{what} {path} is writable by others (mode {stat.S_IMODE(info.st_mode):04o}, "
            f"{stat.filemode(info.st_mode)}): chmod go-w {path}"
        )


def read_private(path: str | Path) -> str:
    """A file only this user or root could have written (a token, a credential).

    A link is followed, as mounted secrets are links, and the file it reaches is checked: who
    owns the file is what matters, not who made the link.
    """
    path = Path(path)
    with _opened(path, os.O_RDONLY) as handle:
        _check_owner(path, os.fstat(handle.fileno()), "file", root_ok=True)
        return _text(path, handle.read(65_536))


def read_own(path: str | Path, limit: int) -> str:
    """A file this process keeps in its state dir, read back: never through a link (one planted
    there is refused, as is a file of someone else's or one others could write), at most
    `limit` bytes (a longer one is refused, never half read)."""
    return _read_regular(Path(path), limit, os.O_RDONLY | _NOFOLLOW, root_ok=False)


def read_config(path: str | Path, limit: int) -> str:
    """A configuration file only this user or root could have written (the console's
    `contexts.toml`), at most `limit` bytes. A link is followed (dotfiles managers link them;
    the file it reaches is checked), and it is opened without waiting for a writer, so a FIFO
    planted there is refused rather than waited on."""
    return _read_regular(Path(path), limit, os.O_RDONLY | _NONBLOCK, root_ok=True)


def _read_regular(path: Path, limit: int, flags: int, *, root_ok: bool) -> str:
    with _opened(path, flags) as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise StateDirError(f"{path} is not a regular file")
        _check_owner(path, info, "file", root_ok=root_ok)
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise StateDirError(f"{path} is over {limit} bytes")
    return _text(path, data)


def _opened(path: Path, flags: int) -> BinaryIO:
    try:
        fd = os.open(path, flags)
    except OSError as error:
        raise StateDirError(f"{path}: {error.strerror or error}") from error
    return os.fdopen(fd, "rb")


def _text(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise StateDirError(f"{path} is not UTF-8 text") from error


def write_private(path: str | Path, text: str) -> None:
    """Replace `path` atomically with a 0600 file: a fresh name, never an existing link."""
    path = Path(path)
    spare = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(spare, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(spare, path)
    except BaseException:
        spare.unlink(missing_ok=True)
        raise
