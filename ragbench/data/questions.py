"""Questions files: the questions people asked, read row by row (labelled by :mod:`ragbench.data.labels`).

A questions file is CSV (``.csv``, ``.tsv``), JSON Lines (``.jsonl``) or YAML (``.yaml``/``.yml``: a list of
mappings, or ``{questions: [...]}``). Columns (keys):

=============  =======================================================================================
``question``   the question (required, non-empty, no two alike)
``id``         a query id (default: ``q-`` + a hash of the question, stable when rows move)
``doc``        one or more document paths relative to the folder: document-level relevance
``relevance``  a grade for every ``doc`` and quote of the row, or one per ``doc`` (default 1)
``quote``      one or more passages quoted from the documents: located in the converted text -> a span
``answer``     one or more answer strings (answer-in-context and end-to-end accuracy)
``class``      a query class (the per-class breakdown)
``synthetic``  ``true`` for a question an LLM wrote (``ragbench questions generate``); default ``false``
``lexical_overlap``  share of a synthetic question's content words found in its source passage (0 to 1)
=============  =======================================================================================

In CSV several values go in one cell separated by ``|`` (``\\|`` is a literal bar); JSONL and YAML take lists.
A file with a BOM or CRLF line ends reads as any other. A YAML file may not use aliases (``*name``), and the file
and its lines are bounded (:mod:`ragbench.core.bounded_io`).

Reading checks each row on its own (columns, flags, numbers); :mod:`ragbench.data.labels` then checks the rows
against the documents (``doc`` paths, quotes located as :mod:`ragbench.data.quotes` finds them) and builds the
queries, qrels and spans. Every problem of the file is reported at once, each with its line
(:class:`~ragbench.core.errors.DatasetError`).
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ragbench.core.bounded_io import MAX_QUESTIONS_BYTES, check_lines, load_yaml, read_text
from ragbench.core.errors import DatasetError
from ragbench.data.quotes import example_quote

COLUMNS = ("id", "question", "doc", "relevance", "quote", "answer", "class", "synthetic", "lexical_overlap")
_TRUE, _FALSE = {"true", "1", "yes", "y"}, {"false", "0", "no", "n", ""}
SUFFIXES = (".csv", ".tsv", ".jsonl", ".yaml", ".yml")
#: the template ``ragbench datasets init`` writes, in this column order
TEMPLATE_COLUMNS = ("question", "doc", "quote", "answer", "class")
_SPLIT = re.compile(r"(?<!\\)\|")


@dataclass
class Question:
    """One row of a questions file, as read (values not yet checked against the documents)."""

    line: int
    question: str = ""
    id: str | None = None
    docs: list[str] = field(default_factory=list)
    relevance: list[Any] = field(default_factory=list)
    quotes: list[str] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    qclass: str | None = None
    synthetic: bool = False
    lexical_overlap: float | None = None


def find_questions_file(root: Path) -> Path | None:
    """``questions.csv`` / ``.tsv`` / ``.jsonl`` / ``.yaml`` / ``.yml`` in ``root`` (the first that exists)."""
    for suffix in SUFFIXES:
        if (root / f"questions{suffix}").is_file():
            return root / f"questions{suffix}"
    return None


def _unknown(col: str) -> str:
    close = difflib.get_close_matches(col, COLUMNS, n=1, cutoff=0.5)
    return (f"unknown column {col!r}" + (f"; did you mean {close[0]!r}?" if close else "")
            + f" (columns: {', '.join(COLUMNS)})")


def _values(v: Any, split: bool) -> list[str]:
    """A cell or value as a list of non-empty strings (CSV cells split on unescaped ``|``)."""
    if v is None:
        return []
    items = v if isinstance(v, list) else [v]
    out = []
    for item in items:
        if item is None:
            continue
        s = str(item)
        parts = _SPLIT.split(s) if split else [s]
        out += [p.replace("\\|", "|").strip() for p in parts if p.strip()]
    return out


def _question(line: int, obj: dict, split: bool, problems: list[str], where: str,
              key_lines: dict[str, int] | None = None) -> Question:
    q = Question(line)
    for key, value in obj.items():
        col = str(key).strip().lower()
        if col not in COLUMNS:
            at = f"{where.rsplit(':', 1)[0]}:{key_lines[str(key)]}" if key_lines and str(key) in key_lines else where
            problems.append(f"{at}: {_unknown(str(key))}")
            continue
        if col == "question":
            q.question = "" if value is None else str(value).strip()
        elif col == "id":
            q.id = str(value).strip() if value not in (None, "") else None
        elif col == "class":
            q.qclass = str(value).strip() if value not in (None, "") else None
        elif col == "relevance":
            q.relevance = _values(value, split)
        elif col == "synthetic":
            flag = str(value).strip().lower() if value is not None else ""
            if flag not in _TRUE | _FALSE:
                problems.append(f"{where}: synthetic {value!r} is not true or false")
            q.synthetic = flag in _TRUE
        elif col == "lexical_overlap":
            if value not in (None, ""):
                try:
                    q.lexical_overlap = float(value)
                    if not 0 <= q.lexical_overlap <= 1:
                        raise ValueError
                except (TypeError, ValueError):
                    problems.append(f"{where}: lexical_overlap {value!r} is not a number from 0 to 1")
        else:
            setattr(q, {"doc": "docs", "quote": "quotes", "answer": "answers"}[col], _values(value, split))
    return q


def _decode(path: Path) -> str:
    text = read_text(path, MAX_QUESTIONS_BYTES, "questions file", DatasetError)
    check_lines(path, text, DatasetError)
    return text


def _read_csv(path: Path, text: str, problems: list[str]) -> list[Question]:
    first = text.split("\n", 1)[0]
    delimiter = "\t" if path.suffix == ".tsv" or ("\t" in first and "," not in first) else \
        (";" if ";" in first and "," not in first else ",")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    header: list[str] | None = None
    out: list[Question] = []
    last = 0
    for row in _csv_rows(path, reader):
        line, last = last + 1, reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        if header is None:
            header = [c.strip().lower() for c in row]
            for c in header:
                if c and c not in COLUMNS:
                    problems.append(f"{path}:{line}: {_unknown(c)}")
            if "question" not in header:
                raise DatasetError(f"{path}:{line}: no 'question' column in the header {row} (columns: "
                                   f"{', '.join(COLUMNS)})")
            continue
        if len(row) > len(header):
            problems.append(f"{path}:{line}: {len(row)} cells but the header has {len(header)} columns (a "
                            "comma inside an unquoted cell?)")
            continue
        obj = {c: v for c, v in zip(header, row) if c in COLUMNS}
        out.append(_question(line, obj, True, problems, f"{path}:{line}"))
    if header is None:
        raise DatasetError(f"{path}: empty questions file (expected a header with a 'question' column)")
    return out


def _csv_rows(path: Path, reader) -> Iterator[list[str]]:
    """The rows of a ``csv.reader``; a CSV error (a cell over the csv module's size limit, a NUL byte) is one line
    naming where it happened."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            raise DatasetError(f"{path}:{reader.line_num}: unreadable CSV ({e})") from None
        yield row


def _read_jsonl(path: Path, text: str, problems: list[str]) -> list[Question]:
    out = []
    for line, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as e:
            problems.append(f"{path}:{line}: malformed JSON ({e.msg} at column {e.colno})")
            continue
        except RecursionError:
            problems.append(f"{path}:{line}: JSON nested too deeply to read")
            continue
        if not isinstance(obj, dict):
            problems.append(f"{path}:{line}: expected a JSON object, got {type(obj).__name__}")
            continue
        out.append(_question(line, obj, False, problems, f"{path}:{line}"))
    return out


def _read_yaml(path: Path, text: str, problems: list[str]) -> list[Question]:
    data, root = load_yaml(path, text, DatasetError, aliases="refuse")  # no aliases: no alias bomb
    items_node = root
    if isinstance(data, dict) and isinstance(data.get("questions"), list):
        items_node = next(v for k, v in root.value if k.value == "questions")
        data = data["questions"]
    if not isinstance(data, list):
        raise DatasetError(f"{path}:1: expected a list of questions (or a 'questions:' list)")
    out = []
    for obj, node in zip(data, items_node.value):
        line = node.start_mark.line + 1
        if not isinstance(obj, dict):
            problems.append(f"{path}:{line}: expected a mapping with a 'question' key, got {type(obj).__name__}")
            continue
        key_lines = {k.value: k.start_mark.line + 1 for k, _ in node.value} \
            if isinstance(node, yaml.MappingNode) else None
        out.append(_question(line, obj, False, problems, f"{path}:{line}", key_lines))
    return out


def read_questions(path: Path) -> tuple[list[Question], list[str]]:
    """The rows of a questions file and the problems found reading them (``file:line: ...``).

    Raises :class:`DatasetError` at once only when the file as a whole cannot be read.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: questions file not found")
    if path.suffix.lower() not in SUFFIXES:
        raise DatasetError(f"{path}: a questions file is {', '.join(SUFFIXES)}, not {path.suffix or 'no suffix'}")
    text = _decode(path)
    problems: list[str] = []
    reader = {".jsonl": _read_jsonl, ".yaml": _read_yaml, ".yml": _read_yaml}.get(path.suffix.lower(), _read_csv)
    return reader(path, text, problems), problems



def write_template(path: Path, docs: dict[str, str], titles: dict[str, str]) -> None:
    """Write a questions file (CSV, JSONL or YAML by suffix) with the columns of :data:`TEMPLATE_COLUMNS` and two
    example rows taken from the documents: one labelled with a document, one with a quote."""
    ids = sorted(docs)
    first = ids[0] if ids else "guides/install.md"
    quoted = example_quote(docs) if docs else None
    qdoc, quote = quoted or (first, "Quote the sentence that answers the question, as it reads in the document.")
    rows = [
        {"question": f"Which page covers {titles.get(first, 'this topic')}?", "doc": first, "quote": "",
         "answer": "", "class": "example"},
        {"question": "Replace me: a question this passage answers", "doc": qdoc, "quote": quote, "answer": "",
         "class": "example"},
    ]
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        text = "".join(json.dumps({k: v for k, v in r.items() if v}, ensure_ascii=False) + "\n" for r in rows)
    elif suffix in (".yaml", ".yml"):
        text = yaml.safe_dump([{k: v for k, v in r.items() if v} for r in rows], sort_keys=False, allow_unicode=True)
    else:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(TEMPLATE_COLUMNS), delimiter="\t" if suffix == ".tsv" else ",",
                                lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        text = buf.getvalue()
    path.write_text(text, encoding="utf-8")
