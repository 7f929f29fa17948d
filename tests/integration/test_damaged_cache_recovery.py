"""Nothing damaged is ever used: a damaged chunk table, vector segment or Qdrant collection is found on the next
run, set aside with a warning naming it, recomputed, and the metrics equal those of a clean run."""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import DEMO, without_costs, write_config

from ragbench.config import load_config
from ragbench.core.hashing import file_sha256
from ragbench.sweep import run_sweep

SWEEP = f"""name: integrity
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: recursive, size: 128}}]
embedders: [{{model: static-retrieval-m2v}}]
retrievers: [{{kind: dense, exact: true}}, {{kind: bm25}}]
metrics: {{cutoffs: [1, 5, 10]}}
ann_fidelity: {{enabled: false}}
output: {{mlflow: false}}
"""


@pytest.fixture
def clean(home, settings, tmp_path):
    """A finished sweep in ``home``, and its metrics per config."""
    cfg = load_config(write_config(tmp_path / "integrity.yaml", SWEEP))
    result = run_sweep(cfg, settings)
    assert result.n_failed == 0
    return cfg, {o.config_id: without_costs(o.metrics) for o in result.outcomes}


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def _rerun(cfg, settings) -> tuple[dict, str]:
    """Run the sweep again, evaluating every config anew (``fresh``: stored results would otherwise be reused and
    the damaged caches never read); its metrics per config and every warning it logged."""
    collect, logger = _Collect(), logging.getLogger("ragbench")
    logger.addHandler(collect)
    try:
        result = run_sweep(cfg, settings, fresh=True)
    finally:
        logger.removeHandler(collect)
    assert result.n_failed == 0
    return {o.config_id: without_costs(o.metrics) for o in result.outcomes}, "\n".join(collect.lines)


def _segments(home):
    return sorted((home / "cache" / "vectors").rglob("seg-*.parquet"))


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _garbage(path, n=16384):
    data = bytearray(path.read_bytes())
    data[: min(n, len(data))] = np.random.default_rng(1).integers(0, 256, min(n, len(data)), dtype=np.uint8).tobytes()
    path.write_bytes(bytes(data))


def _wrong_vectors(path):
    """A valid Parquet file with the same hashes and random vectors: only the checksum can tell."""
    table = pq.read_table(path)
    dim = table.column("vector").type.list_size
    rand = np.random.default_rng(2).normal(size=(table.num_rows, dim)).astype(np.float32)
    pq.write_table(table.set_column(1, "vector", pa.FixedSizeListArray.from_arrays(pa.array(rand.ravel()), dim)),
                   path)


@pytest.mark.parametrize("damage", [_truncate, _garbage, _wrong_vectors], ids=["truncated", "garbage", "wrong"])
def test_damaged_vector_segment_is_quarantined_and_recomputed(clean, home, settings, damage):
    cfg, before = clean
    victim = _segments(home)[0]
    damage(victim)
    # the collection was built from the good vectors: drop it so that the rebuild must read the cache
    for marker in (home / "qdrant-edge").glob("rb_*/ragbench.json"):
        marker.unlink()
    after, log = _rerun(cfg, settings)
    assert f"cache entry {victim} is damaged" in log and "recomputed" in log
    assert len(list((home / "cache" / "quarantine").iterdir())) == 1
    # recomputed vectors are written anew; equal bytes get the same checksummed name back
    assert all(file_sha256(s) == s.name.removesuffix(".parquet").removeprefix("seg-") for s in _segments(home))
    for cid, metrics in before.items():
        assert after[cid] == pytest.approx(metrics, nan_ok=True)


def test_damaged_chunk_table_is_quarantined_and_rebuilt(clean, home, settings):
    cfg, before = clean
    (victim,) = sorted((home / "cache" / "chunks").glob("*.parquet"))
    _truncate(victim)
    after, log = _rerun(cfg, settings)
    assert f"cache entry {victim} is damaged" in log
    for cid, metrics in before.items():
        assert after[cid] == pytest.approx(metrics, nan_ok=True)


def test_damaged_collection_is_rebuilt_not_reused(clean, home, settings):
    cfg, before = clean
    matrices = list((home / "qdrant-edge").rglob("vector_storage-dense/matrix.dat"))
    assert matrices
    for m in matrices:
        _garbage(m)
    after, log = _rerun(cfg, settings)
    assert "is damaged" in log and "rebuilding it from the vector cache" in log
    for cid, metrics in before.items():
        assert after[cid] == pytest.approx(metrics, nan_ok=True)


def test_doctor_reports_then_repairs_a_damaged_home(clean, home, settings):
    from typer.testing import CliRunner

    from ragbench.cli import app

    cfg, before = clean
    res = CliRunner().invoke(app, ["doctor", "--home", str(home)])
    assert res.exit_code == 0 and "healthy" in res.output, res.output
    segment = next(s for s in _segments(home) if s.parent.name == "query")  # the collection's own stay intact
    _garbage(segment)
    matrix = next((home / "qdrant-edge").rglob("vector_storage-dense/matrix.dat"))
    _garbage(matrix)
    res = CliRunner().invoke(app, ["doctor", "--home", str(home)])
    assert res.exit_code == 1 and "2 problem(s) found" in res.output, res.output
    assert segment.exists()  # reported, not moved, without --repair
    res = CliRunner().invoke(app, ["doctor", "--home", str(home), "--repair"])
    assert res.exit_code == 0 and "repaired" in res.output, res.output
    assert not segment.exists() or file_sha256(segment) == segment.name.removesuffix(".parquet").removeprefix("seg-")
    res = CliRunner().invoke(app, ["doctor", "--home", str(home)])
    assert res.exit_code == 0 and "healthy" in res.output, res.output
    after, _ = _rerun(cfg, settings)
    for cid, metrics in before.items():
        assert after[cid] == pytest.approx(metrics, nan_ok=True)
