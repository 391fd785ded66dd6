"""File I/O every layer shares: atomic writes (a temporary file in the same directory, fsync'd, then renamed
over the target, so readers never see half a file), the umask's permissions for files made that way, and a
JSON reader that says what is wrong with a file instead of raising.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from pathlib import Path


def current_umask() -> int:
    """The process umask (Linux: read from /proc, which leaves it untouched; elsewhere set and restored)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def umask_permissions(path: Path) -> None:
    """Give ``path`` (a file, or every file and directory under it) the permissions a plain open() or mkdir()
    would under the umask: safetensors writes 0600 and mkstemp 0600, result files get 0644 under umask 022."""
    mask = current_umask()
    path = Path(path)
    for item in (path, *path.rglob("*")) if path.is_dir() else (path,):
        os.chmod(item, (0o777 if item.is_dir() else 0o666) & ~mask)


def read_json(path: Path) -> tuple[object, str | None]:
    """(the parsed JSON, None), or (None, what is wrong: "cannot be read (...)", "is not UTF-8 text" or "is not
    valid JSON (line L column C: ...)"), for a message that names the file and the fix."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8")), None
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"
    except UnicodeDecodeError:
        return None, "is not UTF-8 text"
    except json.JSONDecodeError as exc:
        return None, f"is not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})"


def atomic_write_text(path: Path, text: str) -> None:
    """Write to a temporary file in the same directory, then rename: readers never see half a file,
    and a failure mid-write leaves the previous version in place."""
    atomic_write_bytes(path, text.encode("utf-8"))


# The temporary names this module (``.<name>.XXXXXXXX.tmp``, mkstemp's 8 characters) and the results probe
# (``.write-check-XXXXXXXX``) make; only these are ever removed as stale, never another program's files.
STALE_TMP = re.compile(r"\..+\.[A-Za-z0-9_]{8}\.tmp|\.write-check-[A-Za-z0-9_]{8}")
STALE_AFTER_S = 120  # older than any write in flight: a write is one file, fsync'd, then renamed
_SWEPT: set[str] = set()  # directories swept by this process


def sweep_stale_tmp(directory: Path, older_than_s: float = STALE_AFTER_S) -> list[Path]:
    """Remove this tool's temporary files in ``directory`` left by a process killed mid-write (older than
    ``older_than_s``); the removed paths. Done once per directory and process, at its first atomic write."""
    removed = []
    now = time.time()
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        try:
            if (STALE_TMP.fullmatch(entry.name) and entry.is_file(follow_symlinks=False)
                    and now - entry.stat(follow_symlinks=False).st_mtime > older_than_s):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:  # raced with another process's sweep or rename: nothing to do
            continue
    return removed


def atomic_write_bytes(path: Path, blob: bytes) -> None:
    """``atomic_write_text`` for bytes. The first write to a directory in a process removes the stale
    temporary files a killed writer left there (``sweep_stale_tmp``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if str(path.parent) not in _SWEPT:
        _SWEPT.add(str(path.parent))
        sweep_stale_tmp(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes 0600; a plain open() would respect the umask
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
