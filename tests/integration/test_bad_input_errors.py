"""Every bad input is answered before heavy work with one line naming the file and line, never a traceback or a
silent guess, and nothing already stored in the home is touched."""

from __future__ import annotations

import json
import shutil

import duckdb
import pytest
from conftest import DEMO, write_config
from typer.testing import CliRunner

from ragbench.cli import app


def _copy_demo(tmp_path):
    ds = tmp_path / "ds"
    shutil.copytree(DEMO, ds)
    return ds


def _edit_jsonl(path, line_no: int, change) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    obj = json.loads(lines[line_no - 1])
    change(obj)
    lines[line_no - 1] = json.dumps(obj)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _set_qrel(ds, row: int, value: str) -> None:
    path = ds / "qrels" / "test.tsv"
    lines = path.read_text().splitlines()
    parts = lines[row].split("\t")
    lines[row] = "\t".join([*parts[:2], value])
    path.write_text("\n".join(lines) + "\n")


def _judged_line(ds) -> int:
    """The corpus line of the document judged on the first qrels row."""
    did = (ds / "qrels" / "test.tsv").read_text().splitlines()[1].split("\t")[1]
    ids = [json.loads(line)["_id"] for line in (ds / "corpus.jsonl").read_text().splitlines()]
    return ids.index(did) + 1


CASES = {
    "relevance 1.5": (lambda ds: _set_qrel(ds, 1, "1.5"), r"test.tsv:2: relevance '1.5' must be an integer >= 0"),
    "relevance -1": (lambda ds: _set_qrel(ds, 1, "-1"), r"test.tsv:2: relevance '-1' must be an integer >= 0"),
    "relevance inf": (lambda ds: _set_qrel(ds, 1, "inf"), r"test.tsv:2: relevance 'inf' must be an integer >= 0"),
    "relevance text": (lambda ds: _set_qrel(ds, 1, "high"), r"test.tsv:2: relevance 'high' is not a number"),
    "empty qrels": (lambda ds: (ds / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n"),
                    r"test.tsv: no judgments"),
    "latin-1 corpus": (lambda ds: (ds / "corpus.jsonl").write_bytes(
        (ds / "corpus.jsonl").read_bytes().replace(b"\n", "\n{\"_id\": \"x\", \"text\": \"caf\xe9\"}\n".encode(
            "latin-1"), 1)), r"corpus.jsonl:2: not UTF-8 \(byte 0xe9\)"),
    "utf-16 queries": (lambda ds: (ds / "queries.jsonl").write_bytes(
        (ds / "queries.jsonl").read_text(encoding="utf-8").encode("utf-16")), r"queries.jsonl:1: UTF-16 text"),
    "query text object": (lambda ds: _edit_jsonl(ds / "queries.jsonl", 3, lambda o: o.update(text={"a": 1})),
                          r"queries.jsonl:3: query .*'text' must be a non-empty string"),
    "empty query text": (lambda ds: _edit_jsonl(ds / "queries.jsonl", 3, lambda o: o.update(text="  ")),
                         r"queries.jsonl:3: query .*'text' must be a non-empty string"),
    "metadata string": (lambda ds: _edit_jsonl(ds / "queries.jsonl", 2, lambda o: o.update(metadata="x")),
                        r"queries.jsonl:2: 'metadata' must be an object, got str"),
    "answers string": (lambda ds: _edit_jsonl(ds / "queries.jsonl", 2, lambda o: o.setdefault("metadata", {})
                                              .update(answers="256MiB")),
                       r"queries.jsonl:2: query .*metadata.answers must be a list of strings"),
    "judged empty document": (lambda ds: _edit_jsonl(ds / "corpus.jsonl", _judged_line(ds),
                                                     lambda o: o.update(text=" \n ")),
                              r"corpus.jsonl:\d+: document .* is judged in test.tsv but its text is empty"),
    # the true cause, not what it leads to
    "no corpus.jsonl": (lambda ds: (ds / "corpus.jsonl").unlink(),
                        r"corpus.jsonl: not found; a BEIR folder holds corpus.jsonl, queries.jsonl and qrels"),
    "corpus _id null": (lambda ds: _edit_jsonl(ds / "corpus.jsonl", 2, lambda o: o.update(_id=None)),
                        r"corpus.jsonl:2: '_id' must be a non-empty string or an integer, got None"),
    "query _id empty": (lambda ds: _edit_jsonl(ds / "queries.jsonl", 4, lambda o: o.update(_id=" ")),
                        r"queries.jsonl:4: '_id' must be a non-empty string or an integer, got ' '"),
    "span end before start": (lambda ds: _edit_jsonl(ds / "spans" / "test.jsonl", 2,
                                                     lambda o: o.update(end=o["start"] - 3)),
                              r"spans/test.jsonl:2: span \[\d+, \d+\) ends before it starts \(end \d+ < start"),
    "span of no length": (lambda ds: _edit_jsonl(ds / "spans" / "test.jsonl", 2, lambda o: o.update(end=o["start"])),
                          r"spans/test.jsonl:2: span \[\d+, \d+\) is empty \(end equals start\)"),
    "span for unknown document": (lambda ds: _edit_jsonl(ds / "spans" / "test.jsonl", 2,
                                                         lambda o: o.update(doc_id="no-such-doc")),
                                  r"spans/test.jsonl:2: span for document 'no-such-doc', which is not in corpus.jsonl"),
}


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A home with one finished sweep: bad inputs afterwards must leave it as it is."""
    tmp = tmp_path_factory.mktemp("stored")
    cfg = write_config(tmp / "ok.yaml", f"""name: ok
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}]
retrievers: [{{kind: bm25}}]
metrics: {{cutoffs: [10]}}
output: {{mlflow: false}}
""")
    res = CliRunner().invoke(app, ["sweep", str(cfg), "--orchestrator", "local", "--home", str(tmp / "home")])
    assert res.exit_code == 0, res.output
    return tmp / "home"


def _rows(home):
    con = duckdb.connect(str(home / "results.duckdb"), read_only=True)
    try:
        return con.execute("SELECT * FROM config_metrics ORDER BY ALL").fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_dataset_input_is_one_line_naming_file_and_line(case, stored, tmp_path):
    damage, message = CASES[case]
    before = _rows(stored)
    ds = _copy_demo(tmp_path)
    damage(ds)
    res = CliRunner().invoke(app, ["datasets", "validate", str(ds)])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    import re

    assert re.search(message, res.output.replace("\n", " ")), res.output
    cfg = write_config(tmp_path / "bad.yaml", f"""name: bad
dataset: {{path: {ds}, queries: all}}
chunkers: [{{kind: whole}}]
retrievers: [{{kind: bm25}}]
output: {{mlflow: false}}
""")
    res = CliRunner().invoke(app, ["sweep", str(cfg), "--orchestrator", "local", "--home", str(stored)])
    assert res.exit_code == 2 and re.search(message, res.output.replace("\n", " ")), res.output
    assert _rows(stored) == before


def test_span_labels_for_unknown_queries_unjudged_pairs_and_non_integer_offsets(tmp_path):
    ds = _copy_demo(tmp_path)
    spans = ds / "spans" / "test.jsonl"
    first = json.loads(spans.read_text().splitlines()[0])
    for change, message in [(dict(query_id="nope"), r"test.jsonl:1: span for query 'nope', which is not in"),
                            (dict(doc_id="nimbus-api-admin"), r"test.jsonl:1: span for \(.*\), which test.tsv does not "
                                                              "judge relevant"),
                            (dict(start="abc"), r"test.jsonl:1: span start and end must be integers"),
                            (dict(start=None), r"test.jsonl:1: span start and end must be integers"),
                            (dict(relevance=-1), r"test.jsonl:1: relevance -1 must be an integer >= 0")]:
        lines = spans.read_text().splitlines()
        lines[0] = json.dumps({**first, **change})
        spans.write_text("\n".join(lines) + "\n")
        res = CliRunner().invoke(app, ["datasets", "validate", str(ds)])
        assert res.exit_code == 2 and "Traceback" not in res.output, res.output
        import re

        assert re.search(message, res.output.replace("\n", " ")), (change, res.output)


def test_a_home_that_is_a_file_is_refused_clearly(tmp_path):
    home = tmp_path / "home"
    home.write_text("not a folder")
    cfg = write_config(tmp_path / "h.yaml", f"""name: h
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}]
retrievers: [{{kind: bm25}}]
output: {{mlflow: false}}
""")
    res = CliRunner().invoke(app, ["sweep", str(cfg), "--orchestrator", "local", "--home", str(home)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "is not a folder" in res.output


def test_a_config_path_that_is_a_folder_is_named_as_a_folder(stored, tmp_path):
    before = _rows(stored)
    (tmp_path / "configs").mkdir()
    for args in (["sweep", str(tmp_path / "configs"), "--orchestrator", "local", "--home", str(stored)],
                 ["datasets", "validate", "--config", str(tmp_path / "configs")]):
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 2 and "Traceback" not in res.output, res.output
        assert f"{tmp_path / 'configs'}: is a folder, not a config file" in res.output.replace("\n", ""), res.output
    assert _rows(stored) == before
