"""Sweep config: validation with file:line errors, stable ids, the grid, and preflight before heavy work."""

from __future__ import annotations

import os

import pytest
from conftest import DEMO, write_config

from ragbench.config import load_config
from ragbench.core.errors import ConfigError, ModelError
from ragbench.sweep import preflight

BASE = f"""name: t
dataset:
  path: {DEMO}
chunkers:
  - kind: whole
  - kind: fixed
    size: 64
    overlap: 16
embedders:
  - model: all-MiniLM-L6-v2
  - model: static-retrieval-m2v
retrievers:
  - kind: bm25
  - kind: dense
    exact: true
"""


def test_grid_and_stable_ids(tmp_path):
    cfg = load_config(write_config(tmp_path / "a.yaml", BASE))
    grid = cfg.expand()
    # 2 chunkers x (bm25 + dense x 2 embedders)
    assert len(grid) == 2 * (1 + 2)
    assert len({c.config_id for c in grid}) == len(grid)
    again = load_config(write_config(tmp_path / "b.yaml", BASE.replace("name: t", "name: other")))
    assert [c.config_id for c in again.expand()] == [c.config_id for c in grid]  # id = hash of the spec only
    assert all(c.embedder is None for c in grid if c.retriever.kind == "bm25")


def test_overlap_not_below_size_names_file_and_line(tmp_path):
    path = write_config(tmp_path / "bad.yaml", BASE.replace("overlap: 16", "overlap: 64"))
    with pytest.raises(ConfigError) as e:
        load_config(path)
    msg = str(e.value)
    assert f"{path}:6: chunkers.1:" in msg and "overlap (64) must be smaller than size (64)" in msg


def test_unknown_field_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match=r"bad.yaml:\d+: chunkers.0.colour: Extra inputs are not permitted"):
        load_config(write_config(tmp_path / "bad.yaml", BASE.replace("  - kind: whole", "  - kind: whole\n    colour: red")))
    with pytest.raises(ConfigError, match=r"broken.yaml:\d+: invalid YAML: expected ',' or ']'"):
        load_config(write_config(tmp_path / "broken.yaml", "name: t\ndataset: [unclosed\n"))
    with pytest.raises(ConfigError, match="a dense or hybrid retriever needs at least one entry under 'embedders'"):
        load_config(write_config(tmp_path / "noemb.yaml", BASE.split("embedders:")[0] +
                                 "retrievers:\n  - kind: dense\n"))


def test_unknown_model_fails_in_preflight(tmp_path, settings):
    cfg = load_config(write_config(tmp_path / "m.yaml", BASE.replace("static-retrieval-m2v", "no-such/model-xyz")))
    with pytest.raises(ModelError, match=r"unknown model 'no-such/model-xyz'.*offline"):
        preflight(cfg, settings)


def test_dataset_path_resolves_against_config_file(tmp_path):
    sub = tmp_path / "configs"
    sub.mkdir()
    rel = os.path.relpath(DEMO, sub)
    cfg = load_config(write_config(sub / "rel.yaml", BASE.replace(str(DEMO), rel)))
    assert cfg.dataset.path.resolve() == DEMO.resolve()


def _error(tmp_path, text: str, name: str = "bad.yaml") -> str:
    with pytest.raises(ConfigError) as e:
        load_config(write_config(tmp_path / name, text))
    return str(e.value)


def test_a_key_given_twice_is_refused_with_its_line(tmp_path):
    msg = _error(tmp_path, BASE + "metrics: {primary: ndcg@10}\nmetrics: {primary: mrr@10}\n")
    assert "bad.yaml:17: invalid YAML: key 'metrics' is given twice (first on line 16)" in msg


def test_the_same_chunker_or_retriever_twice_is_refused(tmp_path):
    twice = BASE.replace("  - kind: bm25\n", "  - kind: bm25\n  - {kind: bm25, k1: 1.2}\n")
    assert "bad.yaml:14: retrievers.1: the same as retrievers.0 (it would be evaluated twice)" in _error(tmp_path,
                                                                                                          twice)
    named = BASE.replace("  - kind: whole\n", "  - kind: whole\n  - {kind: whole, name: full}\n")
    assert "chunkers.1: the same as chunkers.0" in _error(tmp_path, named)  # a display name is not a new chunker


def test_primary_and_show_must_be_measures_the_sweep_computes(tmp_path):
    msg = _error(tmp_path, BASE + "metrics: {primary: ndgc@10, cutoffs: [1, 10]}\n")
    assert "bad.yaml:16: metrics.primary: 'ndgc@10' is not a measure this sweep computes; did you mean 'ndcg@10'?" \
        in msg
    msg = _error(tmp_path, BASE + "metrics: {primary: ndcg@20, cutoffs: [1, 10]}\n")  # a cutoff not computed
    assert "metrics.primary: 'ndcg@20' is not a measure" in msg
    msg = _error(tmp_path, BASE + "metrics:\n  show: [recall@10, chunkstat_spans_split, recal@10]\n")
    assert "bad.yaml:17: metrics.show.2: 'recal@10' is not a measure this sweep computes" in msg
    ok = load_config(write_config(tmp_path / "ok.yaml", BASE + "metrics: {show: [span_recall@5, evidence_recall@512tok,"
                                                               " chunkstat_spans_split, reach_hit@10/50]}\n"))
    assert ok.metrics.show[0] == "span_recall@5"


def test_a_config_that_is_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "latin.yaml"
    path.write_bytes(BASE.replace("name: t", "name: caf\xe9").encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin\.yaml:1: not UTF-8 text \(byte 0xe9\)"):
        load_config(path)


def test_the_device_is_not_part_of_a_config_identity_and_cuda_without_gpu_fails_before_work(tmp_path, settings):
    auto = load_config(write_config(tmp_path / "a.yaml", BASE))
    cpu = load_config(write_config(tmp_path / "c.yaml", BASE.replace("  - model: all-MiniLM-L6-v2\n",
                                                                   "  - model: all-MiniLM-L6-v2\n    device: cpu\n")))
    assert [c.config_id for c in auto.expand()] == [c.config_id for c in cpu.expand()]
    assert cpu.embedders[0].device == "cpu"
    import torch

    if not torch.cuda.is_available():
        cuda = load_config(write_config(tmp_path / "g.yaml", BASE.replace("  - model: static-retrieval-m2v\n",
                                                                        "  - model: static-retrieval-m2v\n"
                                                                        "    device: cuda\n")))
        with pytest.raises(ModelError, match="device: cuda was asked for, but torch sees no CUDA GPU"):
            preflight(cuda, settings)
