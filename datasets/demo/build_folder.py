#!/usr/bin/env python3
"""Build ``datasets/demo-folder``: the Nimbus docs of this demo as a folder of real files, with quote-labelled
questions, the way a team's own documentation looks to ``format: folder``.

* Every document becomes ``<doc_type>/<doc_id>.md`` (``# Title`` then the text), except
  ``reference/nimbus-errors-4xxx.html`` and ``reference/nimbus-config-storage.html`` (HTML pages),
  ``release-notes/nimbus-release-3-4-0.pdf`` (a PDF) and ``troubleshooting/nimbus-troubleshoot-storage.docx``
  (a Word file).
* ``questions.csv``: every demo query with its relevant documents (``doc``, graded ``relevance``), its evidence as
  quotes (the span texts of ``spans/test.jsonl``, lengthened where a span's text occurs twice in the documents), its
  answers and its class. The two unanswerable queries have no label: they are counted, never scored.

Run from the repository root with the project's environment (it needs ``fpdf2`` and ``python-docx``, the ``dev``
extra, and ragbench itself to check every quote is found exactly once after conversion)::

    .venv/bin/python datasets/demo/build_folder.py

The output is deterministic (fixed PDF dates, sorted rows).
"""

from __future__ import annotations

import csv
import datetime as dt
import html
import io
import json
import re
import shutil
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "demo-folder"
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from ragbench.data.convert import KINDS, convert  # noqa: E402
from ragbench.data.questions import find_all, normalize  # noqa: E402

AS_HTML = {"nimbus-errors-4xxx", "nimbus-config-storage"}
AS_PDF = {"nimbus-release-3-4-0"}
AS_DOCX = {"nimbus-troubleshoot-storage"}
FIXED_DATE = dt.datetime(2024, 6, 1, tzinfo=dt.timezone.utc)


def blocks(text: str) -> list[tuple[str, object]]:
    """Markdown blocks as ``(kind, payload)``: heading (level, text), list (ordered, items), code, table, para."""
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif line.startswith("```"):
            j = i + 1
            while not lines[j].startswith("```"):
                j += 1
            out.append(("code", "\n".join(lines[i + 1:j])))
            i = j + 1
        elif m := re.match(r"^(#{1,6}) (.*)$", line):
            out.append(("heading", (len(m.group(1)), m.group(2))))
            i += 1
        elif re.match(r"^(- |\d+\. )", line):
            ordered = not line.startswith("- ")
            items = []
            while i < len(lines) and re.match(r"^(- |\d+\. )", lines[i]):
                items.append(re.sub(r"^(- |\d+\. )", "", lines[i]))
                i += 1
            out.append(("list", (ordered, items)))
        elif line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                cells = [c.strip() for c in lines[i].strip("|").split("|")]
                if not all(re.fullmatch(r"-+", c) for c in cells):
                    rows.append(cells)
                i += 1
            out.append(("table", rows))
        else:
            para = []
            while i < len(lines) and lines[i].strip() and not re.match(r"^(#|- |\d+\. |```|\|)", lines[i]):
                para.append(lines[i])
                i += 1
            out.append(("para", " ".join(para)))
    return out


def inline_html(text: str) -> str:
    text = html.escape(text, quote=False)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", text)


def to_html(title: str, text: str) -> str:
    body = [f"<h1>{html.escape(title)}</h1>"]
    for kind, payload in blocks(text):
        if kind == "heading":
            level, t = payload
            body.append(f"<h{level}>{inline_html(t)}</h{level}>")
        elif kind == "list":
            ordered, items = payload
            tag = "ol" if ordered else "ul"
            body.append(f"<{tag}>" + "".join(f"<li>{inline_html(x)}</li>" for x in items) + f"</{tag}>")
        elif kind == "code":
            body.append(f"<pre><code>{html.escape(payload)}\n</code></pre>")
        elif kind == "table":
            head, *rows = payload
            body.append("<table><tr>" + "".join(f"<th>{inline_html(c)}</th>" for c in head) + "</tr>"
                        + "".join("<tr>" + "".join(f"<td>{inline_html(c)}</td>" for c in r) + "</tr>" for r in rows)
                        + "</table>")
        else:
            body.append(f"<p>{inline_html(payload)}</p>")
    return ("<!doctype html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><title>"
            f"{html.escape(title)} - Nimbus docs</title>\n<style>body {{ font-family: sans-serif; }}</style></head>\n"
            "<body>\n<nav><a href=\"index.html\">Nimbus documentation</a></nav>\n<main>\n"
            + "\n".join(body) + "\n</main>\n</body>\n</html>\n")


def plain(text: str) -> str:
    return text.replace("**", "").replace("`", "")


def to_pdf(title: str, text: str) -> bytes:
    from fpdf import FPDF

    pdf = FPDF()

    def para(height: int, text: str) -> None:
        pdf.multi_cell(0, height, text, new_x="LMARGIN", new_y="NEXT")

    pdf.set_creation_date(FIXED_DATE)
    pdf.set_title(title)
    pdf.set_author("Nimbus documentation (synthetic, MIT)")
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 16)
    para(8, title)
    pdf.ln(2)
    for kind, payload in blocks(text):
        if kind == "heading":
            pdf.set_font("Helvetica", "B", 13)
            para(7, plain(payload[1]))
        elif kind == "list":
            pdf.set_font("Helvetica", "", 11)
            for n, item in enumerate(payload[1], 1):
                para(6, (f"{n}. " if payload[0] else "- ") + plain(item))
        elif kind == "code":
            pdf.set_font("Courier", "", 10)
            para(5, payload)
        else:
            pdf.set_font("Helvetica", "", 11)
            para(6, plain(payload if isinstance(payload, str) else "\n".join(map(" ".join, payload))))
        pdf.ln(2)
    return bytes(pdf.output())


def to_docx(title: str, text: str) -> bytes:
    import docx

    d = docx.Document()
    d.core_properties.title = title
    d.core_properties.created = FIXED_DATE.replace(tzinfo=None)
    d.core_properties.modified = FIXED_DATE.replace(tzinfo=None)
    d.add_heading(title, 1)
    for kind, payload in blocks(text):
        if kind == "heading":
            d.add_heading(plain(payload[1]), min(payload[0], 9))
        elif kind == "list":
            for item in payload[1]:
                d.add_paragraph(plain(item), style="List Number" if payload[0] else "List Bullet")
        elif kind == "code":
            for line in payload.split("\n"):
                d.add_paragraph(line)
        else:
            d.add_paragraph(plain(payload if isinstance(payload, str) else " ".join(map(" ".join, payload))))
    buf = io.BytesIO()
    d.save(buf)
    return _fixed_zip(buf.getvalue())


def _fixed_zip(data: bytes) -> bytes:
    """The same archive with fixed member dates, so rebuilding gives the same bytes."""
    src, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            fixed = zipfile.ZipInfo(info.filename, date_time=(2024, 6, 1, 0, 0, 0))
            fixed.compress_type = zipfile.ZIP_DEFLATED
            dst.writestr(fixed, src.read(info.filename))
    return out.getvalue()


def unique_quote(quote: str, docs: list[str], texts: dict[str, str]) -> str | None:
    """``quote``, lengthened word by word to the right (then the left) until it occurs once in ``docs`` (compared
    the way ragbench locates quotes), or None when it is not there at all."""
    norm = {d: normalize(texts[d]) for d in docs}
    first = next(((d, p) for d in docs for p in find_all(norm[d][0], normalize(quote)[0])), None)
    if first is None:
        return None
    d, p = first
    text, offsets = texts[d], norm[d][1]
    s, e = offsets[p], offsets[p + len(normalize(quote)[0]) - 1] + 1
    while True:
        candidate = normalize(text[s:e])[0]
        if sum(len(find_all(norm[x][0], candidate)) for x in docs) == 1:
            return " ".join(plain(text[s:e]).split())
        if e < len(text):
            nxt = text.find(" ", e + 1)
            e = nxt if nxt > 0 else len(text)
        elif s > 0:
            s = text.rfind(" ", 0, s - 1) + 1
        else:
            return None


def main() -> None:
    corpus = [json.loads(line) for line in open(HERE / "corpus.jsonl", encoding="utf-8")]
    queries = [json.loads(line) for line in open(HERE / "queries.jsonl", encoding="utf-8")]
    qrels: dict[str, dict[str, int]] = {}
    for line in (HERE / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        q, d, r = line.split("\t")
        qrels.setdefault(q, {})[d] = int(r)
    spans: dict[str, list[dict]] = {}
    for line in open(HERE / "spans" / "test.jsonl", encoding="utf-8"):
        o = json.loads(line)
        spans.setdefault(o["query_id"], []).append(o)

    if OUT.exists():
        shutil.rmtree(OUT)
    path_of, converted, source = {}, {}, {}
    for doc in corpus:
        did, title, text = doc["_id"], doc["title"], doc["text"]
        folder = OUT / doc["metadata"]["doc_type"]
        folder.mkdir(parents=True, exist_ok=True)
        if did in AS_HTML:
            name, data = f"{did}.html", to_html(title, text).encode("utf-8")
        elif did in AS_PDF:
            name, data = f"{did}.pdf", to_pdf(title, text)
        elif did in AS_DOCX:
            name, data = f"{did}.docx", to_docx(title, text)
        else:
            name, data = f"{did}.md", f"# {title}\n\n{text}".encode("utf-8")
        (folder / name).write_bytes(data)
        path_of[did] = f"{doc['metadata']['doc_type']}/{name}"
        converted[did] = convert(data, KINDS[Path(name).suffix])[0]
        source[did] = text

    rows = []
    for q in queries:
        qid = q["_id"]
        rels = qrels.get(qid, {})
        docs = sorted(rels)
        quotes = []
        for s in sorted(spans.get(qid, []), key=lambda s: (s["doc_id"], s["start"])):
            text = source[s["doc_id"]][s["start"]:s["end"]]
            quote = unique_quote(" ".join(plain(text).split()), docs, converted)
            if quote is None:
                raise SystemExit(f"{qid}: the evidence {text[:60]!r} is not found once in {docs} after conversion")
            quotes.append(quote.replace("|", "\\|"))
        rows.append({"id": qid, "question": q["text"], "doc": "|".join(path_of[d] for d in docs),
                     "relevance": "|".join(str(rels[d]) for d in docs), "quote": "|".join(quotes),
                     "answer": "|".join(a.replace("`", "") for a in q["metadata"].get("answers", [])),
                     "class": q["metadata"].get("class") or ""})
    with open(OUT / "questions.csv", "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["id", "question", "doc", "relevance", "quote", "answer", "class"],
                                lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(corpus)} documents and {len(rows)} questions to {OUT}")


if __name__ == "__main__":
    main()
