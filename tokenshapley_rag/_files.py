"""Crash-safe file handling: atomic writes, fsync, an exclusive lock, file hashes, and
where the cache lives.

Nothing here knows about models. A file written with :func:`write_bytes_atomic`
is either the old one or the complete new one, never a mix: the bytes go into a
temporary file in the same folder, which is then renamed over the target.

The model cache (converted models, file hashes) uses all of it. The sentence cache's
``.npz`` entries are the same pattern without fsync (a truncated entry fails its CRC check
on read and is rebuilt): ``write_bytes_atomic(path, data, prefix=".tmp-", suffix=".npz",
fsync=False)``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "default_cache_dir",
    "discard",
    "exclusive_lock",
    "file_sha256",
    "fsync_dir",
    "fsync_file",
    "sha256_of",
    "write_bytes_atomic",
    "write_json_atomic",
]


def write_bytes_atomic(
    path: Path,
    data: bytes,
    *,
    prefix: str | None = None,
    suffix: str = "",
    fsync: bool = True,
) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename.

    Parameters
    ----------
    path : pathlib.Path
        The target; its folder must exist.
    data : bytes
        The whole new content.
    prefix, suffix : str
        Name of the temporary file beside ``path`` (default prefix ``.<name>.``), so
        that a sweep can find the ones a crash left behind.
    fsync : bool, default=True
        Flush the file to disk before the rename. Without it a crash can leave a
        renamed but truncated file: skip it only for data that is checked on read
        and can be rebuilt.

    Raises
    ------
    OSError
        The temporary file cannot be created, written or renamed; it is removed.
    """
    fd, tmp = tempfile.mkstemp(
        prefix=f".{path.name}." if prefix is None else prefix, suffix=suffix, dir=path.parent
    )
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as indented, key-sorted JSON with :func:`write_bytes_atomic`."""
    write_bytes_atomic(path, json.dumps(data, indent=1, sort_keys=True).encode("utf-8"))


def fsync_file(path: Path) -> None:
    """Flush a file that is already written to disk."""
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def fsync_dir(path: Path) -> None:
    """Make the renames inside a folder durable (POSIX; a no-op where folders cannot
    be opened, as on Windows)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def discard(path: Path) -> None:
    """Remove a directory without ever exposing a half-deleted one at ``path``."""
    trash = path.parent / f".trash-{path.name}-{uuid.uuid4().hex[:8]}"
    try:
        os.rename(path, trash)
    except FileNotFoundError:
        return
    if trash.is_symlink():  # rmtree refuses symlinks
        trash.unlink()
    else:
        shutil.rmtree(trash, ignore_errors=True)


@contextlib.contextmanager
def exclusive_lock(lock_path: Path) -> Iterator[bool]:
    """Hold an exclusive advisory lock on ``lock_path``; yields whether locking worked.

    Use it to avoid duplicate work, not for correctness: where ``fcntl`` is missing
    (Windows) or the file system refuses locks, it yields ``False`` and locks nothing.
    """
    try:
        import fcntl
    except ImportError:
        yield False
        return
    with open(lock_path, "a+b") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        except OSError:
            locked = False
        else:
            locked = True
        try:
            yield locked
        finally:
            if locked:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file's content, read in 4 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def file_sha256(path: Path, cache: Path) -> str:
    """sha256 of a file, remembered in ``cache/hashes`` by (path, size, mtime).

    Hashing runs at ~1 GB/s; remembering it keeps repeated loads of big checkpoints
    cheap. The record is rewritten whenever the file's size or mtime changes.
    """
    real = path.resolve()
    st = real.stat()
    key = hashlib.sha256(str(real).encode("utf-8")).hexdigest()[:32]
    record_path = cache / "hashes" / f"{key}.json"
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
        if (record["path"], record["size"], record["mtime_ns"]) == (
            str(real), st.st_size, st.st_mtime_ns,
        ):
            return str(record["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    sha = sha256_of(real)
    # A read-only cache only costs a re-hash next time.
    with contextlib.suppress(OSError):
        record_path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(
            record_path,
            {"path": str(real), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha},
        )
    return sha


def default_cache_dir() -> Path:
    """Return the directory where converted models and file hashes are cached.

    Returns
    -------
    pathlib.Path
        ``$TOKENSHAPLEY_CACHE`` if that environment variable is set and non-empty,
        otherwise ``~/.cache/tokenshapley-rag``. The directory is not created here.

    Examples
    --------
    >>> from unittest import mock
    >>> with mock.patch.dict("os.environ", {"TOKENSHAPLEY_CACHE": "/tmp/ts-cache"}):
    ...     str(default_cache_dir())
    '/tmp/ts-cache'
    """
    env = os.environ.get("TOKENSHAPLEY_CACHE", "").strip()
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "tokenshapley-rag"
