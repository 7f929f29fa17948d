"""SQuAD-format loading: documents at paragraph and article level, answer offsets, span qrels, bad input."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import polars as pl
import pytest

from conftest import FIXTURES

from ragbench.config import DatasetSpec
from ragbench.core.errors import DatasetError
from ragbench.data import load_dataset
from ragbench.data.squad import load_squad, parse_squad, read_squad_json, title_slug

FIXTURE = FIXTURES / "squad_small.json"
RAW = read_squad_json(FIXTURE)


def _raw_answers() -> list[tuple[str, str]]:
    return [(qa["id"], a["text"]) for art in RAW["data"] for p in art["paragraphs"] for qa in p["qas"]
            for a in qa["answers"]]


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "squad_bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("mode", ["paragraph", "article"])
def test_every_answer_offset_points_at_the_answer_text(mode):
    ds = load_squad(DatasetSpec(path=FIXTURE, squad_documents=mode, queries="all"))
    parsed = parse_squad(RAW, str(FIXTURE), mode)
    texts = dict(zip(ds.corpus["doc_id"], ds.corpus["text"]))
    # every distinct answer occurrence, in document coordinates
    for qid, doc_id, start, end, answer in parsed.answers.iter_rows():
        assert texts[doc_id][start:end] == answer, (qid, doc_id)
    # ... and every answer of the file is among them (identical repeats collapse to one row)
    got = set(zip(parsed.answers["query_id"], parsed.answers["text"]))
    assert set(_raw_answers()) == got
    # merged span qrels cover every answer occurrence
    for qid, doc_id, start, end, _ in parsed.answers.iter_rows():
        cover = ds.spans.filter((pl.col("query_id") == qid) & (pl.col("doc_id") == doc_id)
                                & (pl.col("start") <= start) & (pl.col("end") >= end))
        assert cover.height == 1


def test_paragraph_documents():
    ds = load_squad(DatasetSpec(path=FIXTURE, squad_documents="paragraph", queries="all"))
    assert ds.corpus["doc_id"].to_list() == ["nimbus-harbor-p0", "nimbus-harbor-p1", "copper-valley-p0",
                                              "copper-valley-p1", "copper-valley-p2"]
    assert ds.corpus["title"][0] == "Nimbus Harbor"
    assert ds.queries.height == 11
    q = {r["query_id"]: r for r in ds.queries.iter_rows(named=True)}
    assert q["sq-001"]["answers"] == ["1743", "in 1743"]  # deduplicated, order kept
    assert q["sq-001"]["query_class"] is None
    assert q["sq-010"]["answers"] == []
    # qrels: one (query, doc) per answered question; the unanswerable one is unlabelled
    assert ds.qrels.height == 10 and set(ds.qrels["relevance"]) == {1}
    assert ds.n_unlabelled == 1
    # answer at offset 0 and at the very end of a paragraph
    sp = {(r["query_id"]): (r["start"], r["end"]) for r in ds.spans.iter_rows(named=True)}
    ctx0 = RAW["data"][0]["paragraphs"][0]["context"]
    assert sp["sq-002"] == (0, len("Nimbus Harbor is a small port town"))  # merged with "Nimbus Harbor"
    assert sp["sq-003"] == (ctx0.index("The harbor"), len(ctx0))
    assert sp["sq-011"] == (0, len("Copper Valley"))
    # "1743" and "in 1743" overlap: merged into one span with a counted warning per merge
    assert sp["sq-001"] == (ctx0.index("in 1743"), ctx0.index("in 1743") + len("in 1743"))
    merges = [w for w in ds.warnings if "overlaps another span" in w]
    assert sorted(w.split("of (")[1].split(",")[0] for w in merges) == [
        "sq-001", "sq-002", "sq-003", "sq-005", "sq-007", "sq-008", "sq-009"]


def test_article_documents_shift_offsets():
    ds = load_squad(DatasetSpec(path=FIXTURE, squad_documents="article"))
    assert ds.corpus["doc_id"].to_list() == ["nimbus-harbor", "copper-valley"]
    paras = [p["context"] for p in RAW["data"][1]["paragraphs"]]
    assert ds.corpus["text"][1] == "\n\n".join(paras)
    sp = {r["query_id"]: (r["doc_id"], r["start"], r["end"]) for r in ds.spans.iter_rows(named=True)}
    # sq-011 is the whole last paragraph: it ends at the very end of the article
    shift = len(paras[0]) + 2 + len(paras[1]) + 2
    assert sp["sq-011"] == ("copper-valley", shift, shift + len("Copper Valley"))
    assert sp["sq-011"][2] == len(ds.corpus["text"][1])
    # in_qrels (the default) drops the unanswerable question
    assert "sq-010" not in ds.queries["query_id"].to_list() and ds.queries.height == 10


def test_fingerprint_depends_on_mode_and_dispatch_via_load_dataset():
    a = load_squad(DatasetSpec(path=FIXTURE, squad_documents="paragraph"))
    b = load_dataset(DatasetSpec(path=FIXTURE, format="squad", squad_documents="article"))
    c = load_squad(DatasetSpec(path=FIXTURE, squad_documents="paragraph"))
    assert a.fingerprint == c.fingerprint != b.fingerprint
    assert b.corpus.height == 2


def test_folder_with_split_file_and_subset(tmp_path):
    (tmp_path / "dev.json").write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    ds = load_squad(DatasetSpec(path=tmp_path, split="dev", max_queries=3, seed=1))
    assert ds.queries.height == 3
    assert set(ds.spans["query_id"]) <= set(ds.queries["query_id"])


def test_bad_offset_is_an_error_naming_file_question_and_strings(tmp_path):
    data = copy.deepcopy(RAW)
    data["data"][1]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] += 1  # "1880" -> "880,"
    path = _write(tmp_path, data)
    with pytest.raises(DatasetError) as e:
        load_squad(DatasetSpec(path=path))
    msg = str(e.value)
    assert str(path) in msg and "sq-006" in msg and "'1880'" in msg and "'880,'" in msg
    assert "data[1].paragraphs[0].qas[0].answers[0]" in msg


def test_repair_nearest_moves_off_by_one_offsets_with_a_warning(tmp_path):
    data = copy.deepcopy(RAW)
    data["data"][1]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] += 1
    data["data"][0]["paragraphs"][1]["qas"][0]["answers"][0]["answer_start"] -= 2
    parsed = parse_squad(data, "bad.json", "paragraph", repair="nearest")
    repaired = [w for w in parsed.warnings if "moved to the nearest occurrence" in w]
    assert len(repaired) == 2
    ctx = data["data"][1]["paragraphs"][0]["context"]
    row = parsed.spans.filter(pl.col("query_id") == "sq-006").row(0, named=True)
    assert ctx[row["start"]:row["end"]] == "1880"
    # too far away to repair: still an error
    data["data"][1]["paragraphs"][0]["qas"][0]["answers"][0]["text"] = "Brandt"
    with pytest.raises(DatasetError, match="does not occur within"):
        parse_squad(data, "bad.json", "paragraph", repair="nearest")


def test_duplicate_question_ids_are_an_error(tmp_path):
    data = copy.deepcopy(RAW)
    data["data"][1]["paragraphs"][1]["qas"][0]["id"] = "sq-001"
    with pytest.raises(DatasetError, match=r"data\[1\]\.paragraphs\[1\]\.qas\[0\]: duplicate question id 'sq-001' "
                                           r"\(first at data\[0\]\.paragraphs\[0\]\.qas\[0\]\)"):
        load_squad(DatasetSpec(path=_write(tmp_path, data)))


@pytest.mark.parametrize("edit, where, what", [
    (lambda d: d["data"][1]["paragraphs"][1]["qas"][0].pop("question"), r"data\[1\]\.paragraphs\[1\]\.qas\[0\]",
     "missing key 'question'"),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][1]["answers"][0].pop("answer_start"),
     r"data\[0\]\.paragraphs\[0\]\.qas\[1\]\.answers\[0\]", "missing key 'answer_start'"),
    (lambda d: d["data"][1].pop("title"), r"data\[1\]", "missing key 'title'"),
    (lambda d: d["data"][0]["paragraphs"][1].update(context=None), r"data\[0\]\.paragraphs\[1\]\.context",
     "expected str"),
    (lambda d: d.pop("data"), "top level", "missing key 'data'"),
])
def test_malformed_files_name_the_json_path(tmp_path, edit, where, what):
    data = copy.deepcopy(RAW)
    edit(data)
    with pytest.raises(DatasetError, match=f"{where}: .*{what}" if where != "top level" else what):
        load_squad(DatasetSpec(path=_write(tmp_path, data)))


def test_malformed_json_and_missing_file(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"data": [', encoding="utf-8")
    with pytest.raises(DatasetError, match="malformed JSON"):
        load_squad(DatasetSpec(path=bad))
    with pytest.raises(DatasetError, match="not found"):
        load_squad(DatasetSpec(path=tmp_path / "missing.json"))


def test_title_slug():
    assert title_slug("Super_Bowl_50") == "super-bowl-50"
    assert title_slug("Beyoncé (singer)") == "beyonc-singer"
