"""Where pmpp keeps what it builds and measures: one cache root for every part of the package.
A leaf: it imports nothing of pmpp."""
from __future__ import annotations

import contextlib
import fcntl
import functools
import os
from pathlib import Path


def cache_dir(part: str | None = None) -> Path:
    """The cache root ($PMPP_CACHE_DIR, else ~/.cache/pmpp), or its folder ``part`` (created)."""
    root = _cache_root(os.environ.get("PMPP_CACHE_DIR") or "")
    if part is None:
        return root
    path = root / part
    path.mkdir(parents=True, exist_ok=True)
    return path


@functools.lru_cache(maxsize=None)
def _cache_root(setting: str) -> Path:
    """The cache root for $PMPP_CACHE_DIR == ``setting``, as an absolute path: the CPU engine's
    compiler runs inside the cache, and its worker loads modules from it, so a relative setting is
    resolved once, against the directory current when it is first used."""
    return Path(setting).expanduser().resolve() if setting else Path.home() / ".cache" / "pmpp"


@contextlib.contextmanager
def building(stem):
    """Hold ``stem``.lock, an exclusive lock between processes, while the files named ``stem``.*
    are built: two builds of one cache entry at once (pytest-xdist's workers, two notebooks) must
    not both run; zig's clang, for one, then sees the source twice ("redefinition of ...")."""
    with open(f"{stem}.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)
