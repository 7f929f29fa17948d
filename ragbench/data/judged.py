"""The dataset's second label source: the judgments a team adds to its labels (``ragbench judge merge``).

Where it lives: ``judgments.csv`` beside the questions file of a folder dataset, ``qrels/<split>.judged.tsv`` in a
BEIR folder (:func:`judgments_path`). Columns, one judgment a row, keyed by ``(query_id, doc, source)``::

    query_id, doc, relevance, source, judge, judged_at

``relevance`` is an integer 0-3 (0: not relevant); ``source`` is ``person`` or ``assessor:<model>``; ``judge``
names who (a person's login, a model) and ``judged_at`` when (ISO 8601, UTC).

Which rows count is the dataset's ``labels`` option: ``human`` (the default) adds the ``person`` rows to the
dataset's own labels, ``human+assessor`` also the ``assessor:*`` rows. The dataset's own labels always win over a
judgment of the same (query, document), a person's over an assessor's. The judgments that count are hashed into
:attr:`~ragbench.data.dataset.Dataset.labels_fingerprint` (None when none count): the dataset fingerprint, which
chunks, vectors and collections are keyed by, never changes with them, so a sweep re-judges its stored rankings.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl

from ragbench.core.atomic import write_text_atomically
from ragbench.core.errors import DatasetError
from ragbench.core.hashing import stable_hash
from ragbench.core.progress import log
from ragbench.core.schemas import QRELS_SCHEMA
from ragbench.data.dataset import Dataset

#: the columns of a judgments file, in order
JUDGED_COLUMNS = ("query_id", "doc", "relevance", "source", "judge", "judged_at")
#: the values of the ``labels`` option: which judgments count besides the dataset's own labels
LABEL_MODES = ("human", "human+assessor")
PERSON = "person"
ASSESSOR = "assessor:"
MAX_GRADE = 3


@dataclass(frozen=True)
class Judgment:
    """One stored judgment (a row of the judgments file)."""

    query_id: str
    doc: str
    relevance: int
    source: str
    judge: str
    judged_at: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.query_id, self.doc, self.source)


def judgments_path(root: Path, fmt: str, split: str = "test", questions: Path | None = None) -> Path:
    """Where the judgments of a dataset are stored: ``judgments.csv`` beside the ``questions`` file (default: in
    the folder ``root``) of a folder dataset, ``root/qrels/<split>.judged.tsv`` of any other format."""
    if fmt == "folder":
        return (Path(questions).parent if questions is not None else Path(root)) / "judgments.csv"
    return Path(root) / "qrels" / f"{split}.judged.tsv"


def check_source(source: str, where: str) -> str:
    """``source`` when it is ``person`` or ``assessor:<model>``; anything else is an error naming ``where``."""
    if source == PERSON or (source.startswith(ASSESSOR) and len(source) > len(ASSESSOR)):
        return source
    raise DatasetError(f"{where}: source {source!r} must be 'person' or 'assessor:<model>'")


def check_grade(value, where: str) -> int | None:
    """A judgment's relevance: blank (None: not judged) or an integer 0-3 (``2.0`` is 2); else an error."""
    text = "" if value is None else str(value).strip()
    if not text:
        return None
    try:
        number = float(text)
    except ValueError:
        number = float("nan")
    if not number.is_integer() or not 0 <= number <= MAX_GRADE:
        raise DatasetError(f"{where}: relevance {text!r} must be blank (not judged) or an integer 0-{MAX_GRADE} "
                           "(0: not relevant, 1-3: graded)")
    return int(number)


def read_judgments(path: Path) -> list[tuple[int, Judgment]]:
    """``(line, judgment)`` of every row of a judgments file (CSV, or TSV for a ``.tsv`` name; a header line of
    :data:`JUDGED_COLUMNS`); a missing file holds none. A malformed row is an error naming its line."""
    path = Path(path)
    if not path.is_file():
        return []
    out = []
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f, delimiter="\t" if path.suffix == ".tsv" else ",")
        missing = [c for c in JUDGED_COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise DatasetError(f"{path}:1: missing column(s) {', '.join(missing)} (the header is "
                               f"{', '.join(JUDGED_COLUMNS)})")
        for row in reader:
            where = f"{path}:{reader.line_num}"
            grade = check_grade(row["relevance"], where)
            if grade is None:
                continue
            out.append((reader.line_num, Judgment(str(row["query_id"]), str(row["doc"]), grade,
                                                  check_source(str(row["source"] or ""), where),
                                                  str(row["judge"] or ""), str(row["judged_at"] or ""))))
    return out


def write_judgments(path: Path, judgments: list[Judgment]) -> None:
    """Write ``judgments`` (sorted by query, document, source) to ``path``, atomically (a temporary file renamed)."""
    path, text = Path(path), io.StringIO()
    w = csv.writer(text, delimiter="\t" if path.suffix == ".tsv" else ",", lineterminator="\n")
    w.writerow(JUDGED_COLUMNS)
    for j in sorted(judgments, key=lambda j: j.key):
        w.writerow([j.query_id, j.doc, j.relevance, j.source, j.judge, j.judged_at])
    write_text_atomically(path, text.getvalue())


def counts(source: str, mode: str) -> bool:
    """Whether a judgment of ``source`` counts under the ``labels`` mode ``mode``."""
    return source == PERSON or (mode == "human+assessor" and source.startswith(ASSESSOR))


def with_judgments(ds: Dataset, path: Path, mode: str = "human") -> Dataset:
    """``ds`` with the judgments of ``path`` that count under ``mode`` added to its qrels (see the module
    docstring); the dataset's own qrels are kept as :attr:`~ragbench.data.dataset.Dataset.primary_qrels`. Rows
    naming a query or document the dataset does not hold (a sample, a document since removed) are left out with
    a warning; ``ds`` is returned unchanged when no judgment counts."""
    rows = read_judgments(path)
    if not rows:
        return ds
    queries, docs = set(ds.queries["query_id"]), set(ds.corpus["doc_id"])
    own = set(zip(ds.qrels["query_id"], ds.qrels["doc_id"]))
    chosen: dict[tuple[str, str], Judgment] = {}
    left_out = []
    for lineno, j in rows:
        if not counts(j.source, mode):
            continue
        if j.query_id not in queries or j.doc not in docs:
            left_out.append(f"{path}:{lineno}")
            continue
        pair = (j.query_id, j.doc)
        if pair in own:
            continue
        held = chosen.get(pair)
        if held is None or (held.source != PERSON and j.source == PERSON):
            chosen[pair] = j
    warnings = ds.warnings
    if left_out:
        warnings += (f"{len(left_out)} judgment(s) name a query or document this dataset does not hold, left out "
                     f"(first: {left_out[0]})",)
    if not chosen:
        return replace(ds, warnings=warnings)
    added = pl.DataFrame([(q, d, j.relevance) for (q, d), j in sorted(chosen.items())], schema=QRELS_SCHEMA,
                         orient="row")
    log.info("dataset %s: %d judgment(s) from %s added to its labels (labels: %s)", ds.name, added.height,
             path.name, mode)
    fingerprint = stable_hash({"judged": added.rows()})
    return replace(ds, qrels=pl.concat([ds.qrels, added]), primary_qrels=ds.qrels, labels_fingerprint=fingerprint,
                   warnings=warnings)
