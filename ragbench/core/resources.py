"""Resource guards: fail early and clearly instead of filling the disk halfway through a night."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from ragbench.core.errors import RagbenchError


class ResourceError(RagbenchError):
    """Not enough disk (or another resource) for the next stage."""


def ensure_disk_space(path: Path, needed_bytes: int, what: str, headroom: float = 1.5,
                      reserve_bytes: int = 200 * 1024 * 1024) -> None:
    """Raise :class:`ResourceError` unless ``path``'s filesystem has ``headroom`` x ``needed_bytes`` free.

    ``reserve_bytes`` (``Settings.min_free_bytes``, default 200 MB) stays free so the store and logs still have room.
    """
    path = Path(path)
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    want = int(needed_bytes * headroom) + reserve_bytes
    if free < want:
        raise ResourceError(f"not enough disk space for {what} under {path}: {free / 1e6:.0f} MB free, about "
                            f"{want / 1e6:.0f} MB needed (use a home on a larger disk: --home or RAGBENCH_HOME)")


def peak_rss_bytes() -> int:
    """This process's peak resident memory so far, in bytes (``getrusage``'s ``ru_maxrss``: kilobytes on Linux,
    bytes on macOS); 0 where the ``resource`` module is missing (Windows)."""
    try:
        import resource
    except ImportError:
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def rss_bytes() -> int:
    """This process's resident memory now, in bytes (``/proc/self/statm``); 0 where there is none (not Linux)."""
    import os

    try:
        resident = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
    return resident * os.sysconf("SC_PAGE_SIZE")


#: the cgroup files holding a memory limit, v1 and v2, hard and soft (the files Dask's ``memory_limit`` reads)
CGROUP_MEMORY_FILES = ("memory/memory.limit_in_bytes", "memory/memory.soft_limit_in_bytes", "memory.max",
                       "memory.high", "memory.low")


def memory_limit_bytes(cgroup_root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """The memory this process may use, in bytes: the smallest of the machine's memory (``psutil``), every positive
    limit in the cgroup files under ``cgroup_root`` (:data:`CGROUP_MEMORY_FILES`: a container's or a batch job's;
    ``max`` means none) and the RSS rlimit; None when the machine's memory cannot be read.

    The reading of ``distributed.system.memory_limit``, which sizes Dask's workers, done here because importing
    ``distributed`` for it took 0.8 s of every plan."""
    try:
        import psutil

        limit = int(psutil.virtual_memory().total)
    except Exception:  # the plan informs; a missing reading only drops the warning
        return None
    if sys.platform == "linux":
        for name in CGROUP_MEMORY_FILES:
            try:
                value = int((Path(cgroup_root) / name).read_text())
            except (OSError, ValueError):
                continue
            if value > 0:
                limit = min(limit, value)
    try:
        import resource

        hard = resource.getrlimit(resource.RLIMIT_RSS)[1]
        if 0 < hard < limit:
            limit = hard
    except (ImportError, OSError, ValueError):
        pass
    return limit


def files_bytes(folder: Path) -> int:
    """Apparent bytes of the files under ``folder`` (0 when it is not a folder); :func:`~ragbench.evaluation.cost.
    folder_bytes` counts the bytes allocated instead."""
    folder = Path(folder)
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0
