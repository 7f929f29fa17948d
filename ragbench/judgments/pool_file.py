"""A pool file: the rows of :mod:`.pool` for people (or an assessor) to fill, as CSV (it opens in a spreadsheet)
or JSON Lines.

Columns, in order: ``query_id, question, doc, passage, votes, best_rank, answer_in_passage, relevance``, then the
optional ``source, judge, judged_at`` (blank in a fresh pool: ``judge merge`` fills them for a person's rows; an
assessor writes ``source = assessor:<model>``). ``relevance`` is blank (not judged), 0 (not relevant) or 1-3
(graded). In CSV ``answer_in_passage`` joins the answers found with `` | ``; in JSON Lines it is a list, and a blank
relevance is ``null``.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from ragbench.core.errors import RagbenchError
from ragbench.judgments.pool import PoolRow

POOL_COLUMNS = ("query_id", "question", "doc", "passage", "votes", "best_rank", "answer_in_passage", "relevance")
OPTIONAL_COLUMNS = ("source", "judge", "judged_at")
FORMATS = ("csv", "jsonl")
_JOIN = " | "


def pool_format(path: Path, given: str | None = None) -> str:
    """``given``, else the format of ``path``'s suffix (``.jsonl``/``.json``: jsonl, anything else csv)."""
    if given is not None:
        if given not in FORMATS:
            raise RagbenchError(f"--format {given!r}: choose csv or jsonl")
        return given
    return "jsonl" if Path(path).suffix.lower() in (".jsonl", ".json") else "csv"


def _record(row: PoolRow) -> dict:
    return {"query_id": row.query_id, "question": row.question, "doc": row.doc, "passage": row.passage,
            "votes": row.votes, "best_rank": row.best_rank, "answer_in_passage": list(row.answer_in_passage),
            "relevance": row.relevance, "source": row.source, "judge": row.judge, "judged_at": row.judged_at}


def write_pool(rows: list[PoolRow], path: Path, fmt: str | None = None) -> Path:
    """Write ``rows`` to ``path`` as ``fmt`` (default: by suffix, see :func:`pool_format`); returns ``path``."""
    path, fmt = Path(path), pool_format(path, fmt)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        if fmt == "jsonl":
            for row in rows:
                f.write(json.dumps(_record(row), ensure_ascii=False) + "\n")
            return path
        w = csv.writer(f, lineterminator="\n")
        w.writerow(POOL_COLUMNS + OPTIONAL_COLUMNS)
        for row in rows:
            rec = _record(row)
            rec["answer_in_passage"] = _JOIN.join(row.answer_in_passage)
            rec["relevance"] = "" if row.relevance is None else row.relevance
            w.writerow([rec[c] for c in POOL_COLUMNS + OPTIONAL_COLUMNS])
    return path


def read_pool(path: Path, fmt: str | None = None) -> list[tuple[int, dict]]:
    """``(line, row)`` of every row of a pool file, each row a dict of the columns present (values as written:
    strings in CSV, JSON values in JSON Lines; ``answer_in_passage`` a list in both). A missing file, a missing
    ``query_id``/``doc``/``relevance`` column or a line that is not a JSON object is an error naming the line."""
    path = Path(path)
    if not path.is_file():
        raise RagbenchError(f"{path}: pool file not found")
    fmt = pool_format(path, fmt)
    out: list[tuple[int, dict]] = []
    required = ("query_id", "doc", "relevance")
    with open(path, newline="", encoding="utf-8-sig") as f:
        if fmt == "jsonl":
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as e:
                    raise RagbenchError(f"{path}:{lineno}: not JSON ({e.msg})") from None
                if not isinstance(obj, dict):
                    raise RagbenchError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
                missing = [c for c in required if c not in obj]
                if missing:
                    raise RagbenchError(f"{path}:{lineno}: missing field(s) {', '.join(missing)}")
                out.append((lineno, obj))
            return out
        reader = csv.DictReader(f)
        missing = [c for c in required if c not in (reader.fieldnames or ())]
        if missing:
            raise RagbenchError(f"{path}:1: missing column(s) {', '.join(missing)} (a pool file has "
                                f"{', '.join(POOL_COLUMNS)})")
        last = reader.line_num
        for row in reader:
            start, last = last + 1, reader.line_num  # a row with a multi-line passage: named by its first line
            answers = row.get("answer_in_passage") or ""
            row["answer_in_passage"] = [a for a in answers.split(_JOIN) if a] if isinstance(answers, str) else []
            out.append((start, row))
    return out


def pool_rows(path: Path, fmt: str | None = None) -> list[PoolRow]:
    """The rows of a pool file as :class:`PoolRow` (relevance None when blank), for a round trip; the values are
    not validated here (:func:`ragbench.judgments.merge.merge_pool` does that)."""
    def grade(v):
        return None if v is None or str(v).strip() == "" else int(float(v))

    return [PoolRow(str(r["query_id"]), str(r.get("question") or ""), str(r["doc"]), str(r.get("passage") or ""),
                    int(r.get("votes") or 0), int(r.get("best_rank") or 0), tuple(r.get("answer_in_passage") or ()),
                    grade(r.get("relevance")), str(r.get("source") or ""), str(r.get("judge") or ""),
                    str(r.get("judged_at") or "")) for _, r in read_pool(path, fmt)]
