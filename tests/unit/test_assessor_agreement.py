"""The assessor's agreement with people: Cohen's κ on published tables, the 4 × 4 confusion matrix, the seeded
sample of pairs people judged, the stored agreement and the merge gate below κ 0.4, the grade cache's integrity and
the reply parser. No model: the grading itself is tested with the real llama-server in
tests/system/test_llm_assessor.py."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import polars as pl
import pytest

from ragbench.data.dataset import Dataset
from ragbench.judgments.agreement import (
    JudgedPair,
    assessor_trusted,
    calibration_sample,
    cohen_kappa,
    confusion_matrix,
    measure,
    people_pairs,
)
from ragbench.judgments.assessor import AssessorError, GradeCache, messages, parse_grade
from ragbench.results.store import ResultStore


def _labels(table: dict[tuple[int, int], int]) -> tuple[list[int], list[int]]:
    """Two raters' labels (1 relevant, 0 not) laid out from a 2 × 2 table ``{(rater A, rater B): count}``."""
    a, b = [], []
    for (x, y), count in table.items():
        a += [x] * count
        b += [y] * count
    return a, b


@pytest.mark.parametrize("table, expected", [
    # Wikipedia, "Cohen's kappa", worked example: p_o = 0.7, p_e = 0.5
    ({(1, 1): 20, (1, 0): 5, (0, 1): 10, (0, 0): 15}, 0.4),
    # the same page's two tables with equal agreement p_o = 0.60 but different marginals
    ({(1, 1): 45, (1, 0): 15, (0, 1): 25, (0, 0): 15}, 0.1304),
    ({(1, 1): 25, (1, 0): 35, (0, 1): 5, (0, 0): 35}, 0.2593),
])
def test_kappa_matches_the_published_values(table, expected):
    person, assessor = _labels(table)
    assert cohen_kappa(person, assessor) == pytest.approx(expected, abs=5e-5)
    # grades 2 and 3 are relevant like 1: the binary κ is the same on graded labels
    graded = [g * 3 for g in person]
    assert cohen_kappa(graded, [g * 2 for g in assessor]) == pytest.approx(expected, abs=5e-5)


def test_kappa_against_statsmodels_when_installed():
    sm = pytest.importorskip("statsmodels.stats.inter_rater")
    person, assessor = [0, 0, 1, 1, 2, 3, 0, 3, 1, 0, 2, 2], [0, 1, 1, 0, 2, 3, 0, 0, 1, 1, 3, 2]
    t = [[sum(1 for p, a in zip(person, assessor) if (p > 0) == i and (a > 0) == j) for j in (0, 1)] for i in (0, 1)]
    assert cohen_kappa(person, assessor) == pytest.approx(sm.cohens_kappa(t).kappa)


def test_kappa_undefined_when_everything_got_one_label():
    assert cohen_kappa([1, 2, 3], [2, 3, 1]) is None
    assert cohen_kappa([], []) is None
    assert cohen_kappa([1, 2, 0], [1, 1, 1]) == 0.0  # chance agreement only: the assessor says relevant to all


def test_confusion_matrix_counts_grades_person_rows_assessor_columns():
    m = confusion_matrix([0, 0, 1, 3, 3, 2, 5], [0, 2, 1, 3, 2, 2, 3])
    assert m == ((1, 0, 1, 0),
                 (0, 1, 0, 0),
                 (0, 0, 1, 0),
                 (0, 0, 1, 2))  # the 5 counted as 3
    with pytest.raises(ValueError):
        confusion_matrix([1], [1, 2])


def _pairs(grades: list[int]) -> list[JudgedPair]:
    return [JudgedPair(f"q{i:02d}", "q?", f"d{i}", "p", g, "pool") for i, g in enumerate(grades)]


def test_measure_without_negatives_says_kappa_cannot_be_estimated():
    a = measure("m", 1, ("demo", "fp"), _pairs([2, 1, 3]), [0, 2, 3], measured_at=datetime.now(timezone.utc))
    assert a.kappa is None and not a.trusted
    assert "no pair a person judged not relevant" in a.note and "not trusted" in a.describe()
    assert a.confusion[2][0] == 1 and a.n == 3 and a.n_relevant == 3
    b = measure("m", 1, ("demo", "fp"), _pairs([2, 0, 3, 0]), [3, 0, 1, 1], measured_at=datetime.now(timezone.utc))
    assert b.kappa == pytest.approx(0.5) and b.trusted and b.binary == ((1, 1), (0, 2))


def test_calibration_sample_is_seeded_and_keeps_negatives_up_to_half():
    pairs = _pairs([0] * 5 + [2] * 30)
    s1, s2 = calibration_sample(pairs, 20, seed=3), calibration_sample(pairs, 20, seed=3)
    assert s1 == s2 and len(s1) == 20
    assert sum(p.grade == 0 for p in s1) == 5  # every negative: fewer than half of 20
    assert calibration_sample(pairs, 20, seed=4) != s1
    few_pos = calibration_sample(_pairs([0] * 30 + [1] * 3), 20, seed=0)
    assert sum(p.grade == 0 for p in few_pos) == 17  # positives ran out: negatives fill the rest
    assert len(calibration_sample(pairs, 100, seed=0)) == 35


def _dataset() -> Dataset:
    text = "Intro words here. " * 20 + "The default port is 7401 for replication." + " More text after." * 40
    corpus = pl.DataFrame({"doc_id": ["a.md", "b.md"], "title": ["A", "B"], "text": [text, "Unrelated page."],
                           "metadata": ["{}", "{}"]})
    queries = pl.DataFrame({"query_id": ["q1", "q2"], "text": ["Which port?", "What else?"],
                            "query_class": ["", ""], "answers": [[], []]},
                           schema={"query_id": pl.String, "text": pl.String, "query_class": pl.String,
                                   "answers": pl.List(pl.String)})
    qrels = pl.DataFrame({"query_id": ["q1", "q2"], "doc_id": ["a.md", "b.md"], "relevance": [2, 1]},
                         schema={"query_id": pl.String, "doc_id": pl.String, "relevance": pl.Int32})
    start = text.index("The default port")
    spans = pl.DataFrame({"query_id": ["q1"], "doc_id": ["a.md"], "start": [start], "end": [start + 41],
                          "relevance": [2]}, schema={"query_id": pl.String, "doc_id": pl.String,
                                                     "start": pl.Int64, "end": pl.Int64, "relevance": pl.Int32})
    return Dataset("toy", corpus, queries, qrels, spans, "fp")


def test_people_pairs_are_the_labels_and_the_pool_rows_a_person_filled():
    pool = [{"query_id": "q1", "question": "Which port?", "doc": "b.md", "passage": "Unrelated page.",
             "relevance": "0", "source": "person"},
            {"query_id": "q2", "question": "What else?", "doc": "a.md", "passage": "x", "relevance": "2",
             "source": "assessor:m"},  # an assessor's grade is not a person's
            {"query_id": "q2", "question": "What else?", "doc": "c.md", "passage": "y", "relevance": "",
             "source": ""},  # not judged
            {"query_id": "q2", "question": "What else?", "doc": "d.md", "passage": "z", "relevance": "3",
             "source": ""}]  # filled by a person in the spreadsheet: no source yet
    pairs = people_pairs(_dataset(), pool, max_chars=120)
    assert [(p.query_id, p.doc, p.grade, p.origin) for p in pairs] == [
        ("q1", "a.md", 2, "qrels"), ("q1", "b.md", 0, "pool"), ("q2", "b.md", 1, "qrels"), ("q2", "d.md", 3, "pool")]
    evidence = pairs[0].passage
    assert "The default port is 7401 for replication." in evidence and len(evidence) <= 120
    assert pairs[2].passage == "Unrelated page."
    # labels given (the dataset's own plus merged person judgments): they replace the qrels
    extra = pl.DataFrame({"query_id": ["q2"], "doc_id": ["a.md"], "relevance": [0]})
    assert [(p.doc, p.grade) for p in people_pairs(_dataset(), [], labels=extra)] == [("a.md", 0)]


def _agreement(store_kappa: float | None, minutes: int, model: str = "smol@sha256:1"):
    from ragbench.results.store_judgments import Agreement

    return Agreement(model=model, prompt_version=1, dataset_name="demo", dataset_fingerprint="fp", n=50,
                     n_relevant=30, kappa=store_kappa, confusion=((1, 2, 3, 4),) * 4,
                     measured_at=datetime(2026, 12, 2, tzinfo=timezone.utc) + timedelta(minutes=minutes),
                     seconds_per_pair=0.4, seed=0, note="" if store_kappa is not None else "no negatives",
                     binary=((10, 10), (5, 25)))


def test_agreement_is_stored_and_gates_merge_below_kappa_04(tmp_path):
    store = ResultStore(tmp_path / "results.duckdb")
    trusted, why = assessor_trusted(store, "smol@sha256:1")
    assert not trusted and "no agreement with people on record" in why
    store.record_agreement(_agreement(0.4, 0))
    assert assessor_trusted(store, "smol@sha256:1")[0]  # exactly 0.4 is enough
    store.record_agreement(_agreement(0.39, 5))
    trusted, why = assessor_trusted(store, "smol@sha256:1")
    assert not trusted and "κ 0.39" in why and "--force" in why  # the latest measurement decides
    store.record_agreement(_agreement(None, 10))
    trusted, why = assessor_trusted(store, "smol@sha256:1")
    assert not trusted and "not measurable" in why and "no negatives" in why
    store.record_agreement(_agreement(0.9, 20, model="qwen@sha256:2"))
    assert assessor_trusted(store, "qwen@sha256:2")[0] and not assessor_trusted(store, "smol@sha256:1")[0]
    back = store.assessor_agreements(model="smol@sha256:1")
    assert [a.kappa for a in back] == [None, 0.39, 0.4]
    assert back[1] == _agreement(0.39, 5) and back[1].binary == ((10, 10), (5, 25))
    assert store.assessor_agreements(dataset_name="other") == []


def test_reply_parser_takes_only_a_grade():
    assert parse_grade('{\n  "grade": 2\n}') == 2
    for bad in ('{"grade": 4}', '{"grade": "2"}', '{"grade": true}', "2", '{"score": 1}', "Sure! 3"):
        with pytest.raises(AssessorError):
            parse_grade(bad)
    system, user = messages("  Which   port? ", "word " * 1000)
    assert "0 = the passage has nothing to do" in system["content"] and "3 = the passage is dedicated" in \
        system["content"]
    assert "Question: Which port?" in user["content"] and len(user["content"]) < 2400


def test_grade_cache_recomputes_a_damaged_entry(tmp_path):
    cache = GradeCache(tmp_path)
    key = GradeCache.key("m", "Which port?", "The port is 7401.")
    assert key != GradeCache.key("m", "Which port?", "The port is 7402.")
    assert key != GradeCache.key("m", "Which port?", "The port is 7401.", prompt_version=2)
    path = cache.put(key, 3, 0.25)
    assert cache.get(key) == {"grade": 3, "seconds": 0.25}
    path.write_bytes(b'{"grade": 0, "seconds": 0.25}')  # changed behind the checksum
    assert cache.get(key) is None and not path.exists()  # quarantined: the pair is graded again
    forged = cache.put_bytes(key, b'{"grade": 7}')  # intact bytes, but not a grade
    assert cache.get(key) is None and not forged.exists()
    assert list((tmp_path / "quarantine").iterdir())


def _folder_with_pool(tmp_path, source: str, judge: str):
    """A two-document folder dataset and a pool file with one row graded by ``source``."""
    from ragbench.config import DatasetSpec
    from ragbench.data import load_dataset
    from ragbench.judgments.pool import PoolRow
    from ragbench.judgments.pool_file import write_pool

    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.md").write_text("# Ports\n\nThe broker listens on port 7401 for replication.\n", encoding="utf-8")
    (root / "b.md").write_text("# Backups\n\nSnapshots are kept for fourteen days.\n", encoding="utf-8")
    (root / "questions.csv").write_text("question,doc,quote\nWhich port?,a.md,port 7401 for replication\n",
                                        encoding="utf-8")
    spec = DatasetSpec(format="folder", path=root)
    ds = load_dataset(spec)
    qid = ds.queries["query_id"][0]
    pool = write_pool([PoolRow(qid, "Which port?", "b.md", "Snapshots are kept.", 1, 2, relevance=0, source=source,
                               judge=judge, judged_at="2026-12-02T01:00:00+00:00")], tmp_path / "pool.csv")
    return ds, spec, pool


def test_merge_refuses_an_untrusted_assessor_without_force(tmp_path):
    from ragbench.core.errors import RagbenchError
    from ragbench.judgments.merge import merge_pool

    model = "smol@sha256:1"
    ds, spec, pool = _folder_with_pool(tmp_path, f"assessor:{model}", model)
    store = ResultStore(tmp_path / "results.duckdb")
    with pytest.raises(RagbenchError, match="not merged: assessor smol@sha256:1 has no agreement"):
        merge_pool(pool, ds, spec, "ana", store=store)
    with pytest.raises(RagbenchError, match="not merged"):
        merge_pool(pool, ds, spec, "ana")  # no store to read an agreement from: untrusted
    store.record_agreement(replace(_agreement(0.39, 0), dataset_name=ds.name))
    with pytest.raises(RagbenchError, match="κ 0.39 on 50 pairs"):
        merge_pool(pool, ds, spec, "ana", store=store)
    target = merge_pool(pool, ds, spec, "ana", store=store, force=True).path
    assert target.is_file() and "assessor:smol@sha256:1" in target.read_text()
    target.unlink()
    store.record_agreement(replace(_agreement(0.41, 5), dataset_name=ds.name))
    assert merge_pool(pool, ds, spec, "ana", store=store).added == 1  # trusted now: merged without force


def test_a_persons_rows_merge_without_any_assessor_check(tmp_path):
    from ragbench.judgments.merge import merge_pool

    ds, spec, pool = _folder_with_pool(tmp_path, "", "")
    assert merge_pool(pool, ds, spec, "ana").added == 1


def test_report_section_shows_each_assessors_latest_kappa_and_matrix(tmp_path):
    from types import SimpleNamespace

    from jinja2 import Environment, FileSystemLoader

    from ragbench.reporting.assessor import assessor_section

    store = ResultStore(tmp_path / "results.duckdb")
    assert assessor_section(store, "demo") is None
    store.record_agreement(_agreement(0.62, 0))
    store.record_agreement(_agreement(0.31, 5))  # the latest of this model
    store.record_agreement(_agreement(0.8, 1, model="qwen@sha256:2"))
    store.record_agreement(replace(_agreement(0.9, 9, model="other@sha256:3"), dataset_name="another"))
    section = assessor_section(store, "demo")
    assert [(a.model, a.kappa) for a in section.agreements] == [("smol@sha256:1", 0.31), ("qwen@sha256:2", 0.8)]
    text = "\n".join(section.lines())
    assert "smol@sha256:1 (prompt v1): κ 0.31 on 50 pairs (30 relevant, 20 not): not trusted" in text
    assert "qwen@sha256:2 (prompt v1): κ 0.80" in text and "trusted (κ >= 0.4)" in text
    assert "    0                   1    2    3    4" in text and "0.40 s per pair" in text
    assert section.as_dict()[0]["confusion"][3] == [1, 2, 3, 4] and section.as_dict()[1]["trusted"]
    import ragbench.reporting as reporting

    env = Environment(loader=FileSystemLoader(f"{reporting.__path__[0]}/templates"), autoescape=True)
    html = env.get_template("assessor.html.j2").render(r=SimpleNamespace(assessor=section))
    assert html.count("<table class='assessor-confusion'>") == 2 and "<td class='num'>4</td>" in html
    assert "not trusted" in html and "qwen@sha256:2" in html
    assert env.get_template("assessor.html.j2").render(r=SimpleNamespace(assessor=None)).strip() == ""
