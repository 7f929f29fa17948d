"""Retry policy, disk-space guard, the memory limit the plan checks against, and nested progress bars."""

from __future__ import annotations

import os

import pytest

from ragbench.config import EmbedderSpec
from ragbench.core import progress as progress_mod
from ragbench.core.cache import VectorCache
from ragbench.core.resources import ResourceError, ensure_disk_space, memory_limit_bytes
from ragbench.core.retry import call_with_retries, is_transient
from ragbench.core.settings import Settings
from ragbench.embedding.embed import embed_texts


def test_transient_errors_are_retried_and_permanent_ones_are_not():
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise TimeoutError("server timed out")
        return "ok"

    assert call_with_retries(flaky, delays=(0, 0)) == "ok" and len(calls) == 3
    calls.clear()

    def broken():
        calls.append(1)
        raise ValueError("bad config")

    with pytest.raises(ValueError):
        call_with_retries(broken, delays=(0, 0))
    assert len(calls) == 1  # a permanent error is not retried
    assert is_transient(ConnectionRefusedError()) and not is_transient(MemoryError())


def test_disk_guard_refuses_before_embedding_and_writes_nothing(tmp_path):
    reserve = Settings.from_env({"RAGBENCH_MIN_FREE_BYTES": str(10 ** 18)}).min_free_bytes  # more than any disk has
    with pytest.raises(ResourceError, match=r"not enough disk space for embedding 2 texts under .*MB free"):
        embed_texts(["a", "b"], EmbedderSpec(model="all-MiniLM-L6-v2"), "document", VectorCache(tmp_path),
                    reserve_bytes=reserve)
    assert not list(tmp_path.rglob("*.parquet"))
    ensure_disk_space(tmp_path / "not" / "yet", 1024, "a small write", reserve_bytes=0)  # a missing folder checks its parent's disk


def test_nested_progress_bars_share_one_live_display(monkeypatch):
    monkeypatch.setattr(progress_mod, "progress_enabled", lambda: True)
    monkeypatch.setattr(progress_mod, "_bars", True)  # an earlier in-process CLI call may have turned bars off
    with progress_mod.progress("configs", 2) as outer:
        live = progress_mod._active
        with progress_mod.progress("embed", 3) as inner:
            assert progress_mod._active is live  # joined, not a second live display (rich forbids two)
            inner(3)
        outer(2)
        assert len(live.tasks) == 1  # the inner row is removed when its stage ends
    assert progress_mod._active is None


def test_the_memory_limit_is_read_as_dask_reads_it():
    """The plan's memory limit equals the reading that sizes Dask's workers, on this machine."""
    from distributed.system import memory_limit

    assert memory_limit_bytes() == memory_limit()


def test_a_cgroup_limit_lowers_the_memory_limit(tmp_path):
    """A cgroup file under the given root lowers the limit (a container's), ``max`` and non-positive values do not."""
    import psutil

    total = psutil.virtual_memory().total
    (tmp_path / "memory.max").write_text("max\n")
    (tmp_path / "memory.low").write_text("0\n")
    assert memory_limit_bytes(tmp_path) == memory_limit_bytes(tmp_path / "absent")  # no limit: the machine's
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text(f"{total // 4}\n")  # cgroups v1
    (tmp_path / "memory.high").write_text(f"{total // 2}\n")  # v2 soft: the smaller of the two wins
    assert memory_limit_bytes(tmp_path) == total // 4


def test_a_small_file_written_atomically_is_the_old_one_or_the_new_one_never_part_of_one(tmp_path, monkeypatch):
    """A write that fails half-way (the disk fills: here the write of the text raises after half of it) leaves the
    old file as it was and no temporary file beside it; one that succeeds replaces it whole, with the permissions
    of any file the process writes."""
    from ragbench.core import atomic
    from ragbench.core.atomic import write_text_atomically

    path = tmp_path / "calibration" / "rate.json"
    write_text_atomically(path, '{"old": 1}')  # the folder is made
    assert path.read_text() == '{"old": 1}'
    calls = []

    class FillsTheDisk:  # writes half of what it is given, then the disk is full
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, text):
            calls.append(text)
            self.f.write(text[: len(text) // 2])
            self.f.flush()
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic, "open", lambda *a, **k: FillsTheDisk(open(*a, **k)), raising=False)
    with pytest.raises(OSError, match="No space"):
        write_text_atomically(path, '{"new": 2, "longer": true}', durable=True)
    monkeypatch.undo()
    assert calls and path.read_text() == '{"old": 1}'
    assert sorted(p.name for p in path.parent.iterdir()) == ["rate.json"]
    write_text_atomically(path, '{"new": 2}', durable=True)
    assert path.read_text() == '{"new": 2}' and sorted(p.name for p in path.parent.iterdir()) == ["rate.json"]
    # created as any file of the process is (its umask), not private to its owner: a team's home stays readable
    plain = tmp_path / "plain.json"
    plain.write_text("{}")
    assert path.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
