"""Folder datasets: real files become Markdown documents, quote labels become spans on the converted text, every
bad input is a warning or an error naming file and line, and conversion is cached by content."""

from __future__ import annotations

import json
import shutil

import polars as pl
import pytest
from conftest import ROOT
from folder_fixture import PDF_TITLE, build_folder, make_pdf
from typer.testing import CliRunner

from ragbench.cli import app
from ragbench.config import DatasetSpec
from ragbench.core.cache import DocumentCache
from ragbench.core.errors import DatasetError
from ragbench.data import load_dataset
from ragbench.data.convert import converter_id
from ragbench.data.folder import scan_folder
from ragbench.data.quotes import normalize
from ragbench.index.filters import allowed_doc_ids

DEMO_FOLDER = ROOT / "datasets" / "demo-folder"


def _load(root, cache=None, **kw):
    return load_dataset(DatasetSpec(format="folder", path=root, **kw), cache)


@pytest.fixture
def folder(tmp_path):
    return build_folder(tmp_path / "docs")



def test_every_file_type_becomes_a_markdown_document_with_its_headings(folder):
    ds = _load(folder)
    docs = {r["doc_id"]: r for r in ds.corpus.iter_rows(named=True)}
    assert sorted(docs) == ["faq.txt", "guides/backup.docx", "guides/install.md", "guides/upgrade.md",
                            "reference/errors.html", "release-notes/3.4.pdf"]
    assert docs["guides/install.md"]["text"].startswith("# Installing Nimbus\n")  # Markdown as it is
    html = docs["reference/errors.html"]["text"]
    assert "# Error codes" in html and "## NMB-4013: batch too large" in html  # headings kept, as ATX
    assert "console.log" not in html and "Home | Docs" not in html  # scripts and navigation are not text
    assert "`queue.max_batch_bytes`" in html  # code kept, underscores not escaped
    assert "# Backup and restore" in docs["guides/backup.docx"]["text"]
    assert "## Snapshots" in docs["guides/backup.docx"]["text"]
    assert "256MiB" in docs["release-notes/3.4.pdf"]["text"]
    # title: first heading, else the title the file stores (PDF), else the file name
    assert docs["reference/errors.html"]["title"] == "Error codes"
    assert docs["guides/backup.docx"]["title"] == "Backup and restore"
    assert docs["release-notes/3.4.pdf"]["title"] == PDF_TITLE
    assert docs["faq.txt"]["title"] == "faq"
    assert ds.summary()["unlabelled_queries"] == 1 and ds.queries.height == 9  # counted, kept (never scored)


def test_metadata_holds_folders_type_size_and_date_for_the_filters(folder):
    ds = _load(folder)
    meta = {r[0]: json.loads(r[1]) for r in ds.corpus.select("doc_id", "metadata").iter_rows()}
    m = meta["guides/backup.docx"]
    assert m["folder"] == "guides" and m["folders"] == ["guides"] and m["ext"] == "docx"
    assert m["size"] == (folder / "guides" / "backup.docx").stat().st_size and m["modified"].endswith("+00:00")
    assert meta["faq.txt"]["folders"] == [] and meta["faq.txt"]["folder"] == ""
    assert allowed_doc_ids(ds.corpus, {"folders": "guides"}) == {"guides/install.md", "guides/upgrade.md",
                                                                  "guides/backup.docx"}
    assert allowed_doc_ids(ds.corpus, {"ext": ["pdf", "html"]}) == {"release-notes/3.4.pdf", "reference/errors.html"}
    assert allowed_doc_ids(ds.corpus, {"size": {"lt": 200}}) == {"faq.txt"}
    assert len(allowed_doc_ids(ds.corpus, {"modified": {"gte": "2000-01-01"}})) == 6


def test_quotes_become_spans_of_the_converted_text(folder):
    ds = _load(folder)
    texts = dict(zip(ds.corpus["doc_id"], ds.corpus["text"]))
    questions = dict(zip(ds.queries["text"], ds.queries["query_id"]))
    spans = {(q, d): (s, e) for q, d, s, e, _ in ds.spans.iter_rows()}
    assert len(spans) == 7  # every quote found once
    # a quote typed as it reads: exactly the converted text
    s, e = spans[(questions["Which port do clients connect to?"], "guides/install.md")]
    assert texts["guides/install.md"][s:e] == "The broker listens on port 7400 for clients"
    # case, doubled spaces, typographic apostrophe, an em dash for "--", quotation marks around it, text from a PDF
    for question, doc, quote in [
            ("Is there a Go client?", "faq.txt", "YES, THERE’S an official   Go client library"),
            ("What happens to running jobs when the drain timeout ends?", "guides/upgrade.md",
             "jobs still running when —drain-timeout expires are returned to their queues"),
            ("How often are snapshots taken?", "guides/backup.docx", "Snapshots are taken every six hours"),
            ("What is the new default of queue.max_inflight_bytes?", "release-notes/3.4.pdf",
             "The default of  queue.max_inflight_bytes changes from 128MiB to 256MiB")]:
        s, e = spans[(questions[question], doc)]
        assert normalize(texts[doc][s:e])[0] == normalize(quote.strip("“”"))[0]
    # a quote without `doc` makes its document relevant; `doc` alone is a document label without a span
    qrels = set(zip(ds.qrels["query_id"], ds.qrels["doc_id"]))
    assert (questions["How do I restore a snapshot?"], "guides/backup.docx") in qrels
    assert (questions["Which release added single sign-on?"], "release-notes/3.4.pdf") in qrels
    assert ds.queries.filter(pl.col("text") == "What does NMB-4013 mean?")["answers"][0].to_list() == \
        ["queue.max_batch_bytes"]


def test_unreadable_files_are_skipped_with_a_counted_warning_naming_them(folder):
    make_pdf(folder / "locked.pdf", "Locked", ["Confidential."], password="s3cret")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4\n garbage")
    (folder / "empty.html").write_text("<html><body><script>x()</script></body></html>")
    (folder / "latin1.txt").write_bytes("first line\ncaf\xe9\n".encode("latin-1"))
    (folder / "photo.png").write_bytes(b"\x89PNG")
    (folder / "logo.png").write_bytes(b"\x89PNG")
    ds = _load(folder)
    assert ds.corpus.height == 6  # the readable ones, nothing stops the load
    warnings = "\n".join(ds.warnings)
    assert f"{folder / 'locked.pdf'}: skipped: encrypted PDF (needs a password)" in warnings
    assert f"{folder / 'broken.pdf'}: skipped: unreadable PDF" in warnings
    assert f"{folder / 'empty.html'}: skipped: converts to empty text" in warnings
    assert f"{folder / 'latin1.txt'}:2: skipped: not UTF-8 text (byte 0xe9)" in warnings
    assert "2 file(s) of unsupported types skipped (.png: 2)" in warnings
    assert len(ds.warnings) == 5
    # a question naming a skipped file says why it is not there
    (folder / "questions.csv").write_text("question,doc\nWhat is locked?,locked.pdf\n")
    with pytest.raises(DatasetError, match=r"questions.csv:2: question 'What is locked\?': doc 'locked.pdf' was "
                                           r"skipped: encrypted PDF"):
        _load(folder)


BAD_QUESTIONS = """question,doc,quote,answer,clas
Which port do clients use?,guides/instal.md,,,
,guides/install.md,,,
Which port do clients connect to?,,the broker listens on port 9999,,
How do I upgrade?,guides/upgrade.md,Upgrade one node,,
Which port do clients use?,,,,
What breaks?,,,,
Which port?,guides/install.md|faq.txt,,,
"""


def test_every_questions_problem_is_reported_at_once_with_its_line(folder):
    (folder / "guides" / "upgrade.md").write_text("# Upgrading\n\nUpgrade one node at a time. Upgrade one node "
                                                  "only after the previous one is healthy.\n")
    (folder / "questions.csv").write_text(BAD_QUESTIONS)
    with pytest.raises(DatasetError) as err:
        _load(folder)
    lines = str(err.value).splitlines()
    q = folder / "questions.csv"
    assert lines[0] == f"6 problem(s) with the questions in {q}:"
    assert lines[1] == f"{q}:1: unknown column 'clas'; did you mean 'class'? (columns: id, question, doc, " \
                       "relevance, quote, answer, class, synthetic, lexical_overlap)"
    assert lines[2] == f"{q}:2: question 'Which port do clients use?': doc 'guides/instal.md' is not in the " \
                       "folder; did you mean 'guides/install.md'?"
    assert lines[3] == f"{q}:3: empty question"
    assert lines[4].startswith(f"{q}:4: question 'Which port do clients connect to?': quote 'the broker listens on "
                               "port 9999' is not in any document; closest passage, in guides/install.md: '")
    assert "The broker listens on port 7400" in lines[4]
    assert lines[5] == f"{q}:5: question 'How do I upgrade?': quote 'Upgrade one node' is ambiguous: found 2 times " \
                       "(guides/upgrade.md line 3 (2 times)); quote more of the passage"
    assert lines[6] == f"{q}:6: question 'Which port do clients use?': duplicate of the question on line 2"
    assert len(lines) == 7  # lines 7 and 8 are fine


def test_duplicates_ignore_case_and_spacing_and_relevance_must_match_docs(folder):
    (folder / "questions.csv").write_text("question,doc,relevance\nWhich  PORT?,guides/install.md,2\n"
                                          "which port?,,\nWhere?,guides/install.md|faq.txt,2|1|1\nHow?,faq.txt,high\n")
    with pytest.raises(DatasetError) as err:
        _load(folder)
    text = str(err.value)
    assert "questions.csv:3: question 'which port?': duplicate of the question on line 2" in text
    assert "questions.csv:4: question 'Where?': 3 relevance grades for 2 doc(s)" in text
    assert "questions.csv:5: question 'How?': relevance 'high' is not a whole number >= 0" in text


def test_bom_crlf_and_the_three_file_formats_read_alike(folder):
    rows = [("Which port do clients connect to?", "guides/install.md", "port 7400 for clients", "2"),
            ("Is there a Go client?", "faq.txt", "", "1")]
    csv_text = "question,doc,quote,relevance\r\n" + "".join(f"{q},{d},{qt},{r}\r\n" for q, d, qt, r in rows)
    (folder / "questions.csv").write_bytes("\ufeff".encode() + csv_text.encode())
    a = _load(folder)
    (folder / "questions.csv").unlink()
    (folder / "questions.jsonl").write_text("".join(
        json.dumps({"question": q, "doc": [d], "quote": qt or None, "relevance": int(r)}) + "\r\n"
        for q, d, qt, r in rows), encoding="utf-8-sig")
    b = _load(folder)
    (folder / "questions.jsonl").unlink()
    (folder / "q.yaml").write_text("questions:\n" + "".join(
        f"  - question: {q}\n    doc: [{d}]\n" + (f"    quote: {qt}\n" if qt else "") + f"    relevance: {r}\n"
        for q, d, qt, r in rows))
    c = _load(folder, questions="q.yaml")
    assert "q.yaml" not in c.corpus["doc_id"].to_list()  # the questions file is never a document
    for other in (b, c):
        assert other.queries.equals(a.queries) and other.qrels.sort("query_id").equals(a.qrels.sort("query_id"))
        assert other.spans.equals(a.spans)
    assert a.qrels.filter(pl.col("doc_id") == "guides/install.md")["relevance"].to_list() == [2]
    (folder / "q.yaml").write_text("- question: ok\n- question: fine\n  quotes: x\n")
    with pytest.raises(DatasetError, match=r"q.yaml:3: unknown column 'quotes'; did you mean 'quote'\?"):
        _load(folder, questions="q.yaml")


def test_a_non_utf8_questions_file_names_its_line(folder):
    (folder / "questions.csv").write_bytes(b"question\nok\ncaf\xe9?\n")
    with pytest.raises(DatasetError, match=r"questions.csv:3: not UTF-8 text \(byte 0xe9\)"):
        _load(folder)


def test_include_and_exclude_globs(folder):
    (folder / "questions.csv").write_text("question\nanything?\n")
    assert sorted(_load(folder, include=("*.md",)).corpus["doc_id"]) == ["guides/install.md", "guides/upgrade.md"]
    assert sorted(_load(folder, exclude=("guides/", "*.pdf")).corpus["doc_id"]) == ["faq.txt",
                                                                                   "reference/errors.html"]
    assert sorted(_load(folder, include=("guides/**",), exclude=("*.docx",)).corpus["doc_id"]) == \
        ["guides/install.md", "guides/upgrade.md"]
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD.md").write_text("# not a document")
    (folder / "guides" / "~$backup.docx").write_bytes(b"lock")
    assert _load(folder).corpus.height == 6


def test_conversion_is_cached_by_content_and_a_damaged_entry_is_converted_again(folder, tmp_path, ragbench_log):
    cache_root = tmp_path / "cache"
    first = scan_folder(folder, cache_root=cache_root)
    assert first.n_converted == 6
    second = scan_folder(folder, cache_root=cache_root)
    assert second.n_converted == 0 and [d.text for d in second.documents] == [d.text for d in first.documents]
    # moving a file converts nothing (content-addressed); changing one converts that one, and the log names it
    (folder / "guides" / "upgrade.md").rename(folder / "upgrade.md")
    (folder / "reference" / "errors.html").write_text("<h1>Error codes</h1><p>Only NMB-4013 is left.</p>")
    ragbench_log.clear()
    third = scan_folder(folder, cache_root=cache_root)
    assert [d.doc_id for d in third.documents if not d.cached] == ["reference/errors.html"]
    assert any("converted (new or changed): reference/errors.html" in m for m in ragbench_log)
    assert any("6 documents (1 converted, 5 from the conversion cache)" in m for m in ragbench_log)
    # a damaged entry is quarantined and the file converted again
    faq = next(d for d in third.documents if d.doc_id == "faq.txt")
    key = DocumentCache.key(faq.sha256, converter_id(faq.kind))
    entry = next((cache_root / "converted").rglob(f"{key}.*.json"))
    entry.write_text('{"text": "tampered"}')
    assert DocumentCache(cache_root).verify()[1]
    fourth = scan_folder(folder, cache_root=cache_root)
    assert [d.doc_id for d in fourth.documents if not d.cached] == ["faq.txt"]
    assert "tampered" not in "".join(d.text for d in fourth.documents)
    assert list((cache_root / "quarantine").iterdir())


def test_new_spec_fields_are_dumped_only_when_set():
    from ragbench.data.spec import DatasetSpec as Spec

    plain = Spec(path="x").model_dump(mode="json")
    assert not {"questions", "include", "exclude", "holdout"} & set(plain)
    assert Spec(path="x", holdout=0.3).model_dump(mode="json")["holdout"] == 0.3
    with pytest.raises(ValueError, match="include: only the folder format reads it"):
        Spec(path="x", include=("*.md",))
    with pytest.raises(ValueError):
        Spec(path="x", holdout=1.0)


def test_fingerprint_follows_content_not_location(folder, tmp_path):
    a = _load(folder)
    copy = tmp_path / "elsewhere"
    shutil.copytree(folder, copy)  # copytree keeps modification times
    assert _load(copy).fingerprint == a.fingerprint
    with open(copy / "faq.txt", "a") as f:
        f.write("More.\n")
    assert _load(copy).fingerprint != a.fingerprint
    assert _load(folder, holdout=0.3).fingerprint == a.fingerprint  # the split is not the data


def test_demo_folder_validates_with_its_quotes():
    ds = _load(DEMO_FOLDER)
    assert ds.corpus.height == 36 and ds.queries.height == 34 and ds.n_unlabelled == 2
    assert {d.rsplit(".", 1)[1] for d in ds.corpus["doc_id"]} == {"md", "html", "pdf", "docx"}
    assert ds.spans.height >= 50 and not ds.warnings


# ---------------------------------------------------------------- the CLI
def test_init_reports_the_folder_and_writes_a_template_that_validates(tmp_path):
    root = build_folder(tmp_path / "docs", questions=None)
    make_pdf(root / "locked.pdf", "Locked", ["x"], password="pw")
    runner = CliRunner()
    home = tmp_path / "home"
    out = runner.invoke(app, ["datasets", "init", str(root), "--home", str(home)])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    for suffix, files, docs, skipped in ((".docx", 1, 1, 0), (".pdf", 2, 1, 1), (".md", 2, 2, 0)):
        assert f"│ {suffix} │ {files} │ {docs} │ {skipped} │" in text
    assert "locked.pdf: skipped: encrypted PDF (needs a password)" in text
    assert "6 documents," in text and "tokens (all-MiniLM-L6-v2); 1 file(s) skipped" in text
    template = (root / "questions.csv").read_text().splitlines()
    assert template[0] == "question,doc,quote,answer,class" and len(template) == 3
    out = runner.invoke(app, ["datasets", "validate", str(root), "--home", str(home)])
    assert out.exit_code == 0, out.output
    assert "queries" in out.output and "2" in out.output
    # a second init leaves the questions alone
    (root / "questions.csv").write_text("question\nmine?\n")
    out = runner.invoke(app, ["datasets", "init", str(root), "--home", str(home)])
    assert out.exit_code == 0 and (root / "questions.csv").read_text() == "question\nmine?\n"


def test_validate_lists_every_problem_and_exits_2(folder, tmp_path):
    (folder / "questions.csv").write_text("question,doc,quote\nA?,nope.md,\nB?,,not in any document at all\n")
    out = CliRunner().invoke(app, ["datasets", "validate", str(folder), "--home", str(tmp_path / "home")])
    assert out.exit_code == 2
    text = " ".join(out.output.split())
    assert "questions.csv:2: question 'A?': doc 'nope.md' is not in the folder" in text
    assert "questions.csv:3: question 'B?': quote 'not in any document at all' is not in any document" in text


def test_validate_checks_the_holdout_split(folder, tmp_path):
    out = CliRunner().invoke(app, ["datasets", "validate", str(folder), "--holdout", "0.3", "--home",
                                   str(tmp_path / "home")])
    assert out.exit_code == 0, out.output
    assert "holdout 0.3 (seed 0): 6 labelled tuning queries, 2 held out" in " ".join(out.output.split())
    out = CliRunner().invoke(app, ["datasets", "validate", str(folder), "--holdout", "0.01", "--home",
                                   str(tmp_path / "home")])
    assert out.exit_code == 2 and "leaves none held out" in out.output
