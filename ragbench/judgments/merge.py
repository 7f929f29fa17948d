"""``judge merge``: the filled rows of a pool file stored as the dataset's second label source
(:mod:`ragbench.data.judged`: ``judgments.csv`` beside a folder's questions, ``qrels/<split>.judged.tsv`` of BEIR).

Every filled row is checked before anything is written: ``relevance`` blank (not judged: left out) or an integer
0-3; a query and a document the dataset holds; a (query, document) the dataset's own labels do not already judge
(change those in the questions or qrels file); ``source`` blank (a person) or ``person`` / ``assessor:<model>``.
The first problem is an error naming the file and line (and how many more there are); nothing is stored then.

A row is keyed by (query, document, source): merging it again updates that judgment (its relevance, judge and
time; an unchanged relevance keeps the stored row as it is), never adds a second one. A person's row gets
``source = person``, ``judge`` = the given name and ``judged_at`` = now unless the row says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ragbench.core.errors import DatasetError, RagbenchError
from ragbench.data import DatasetSpec
from ragbench.data.dataset import Dataset
from ragbench.data.judged import PERSON, Judgment, check_grade, check_source, judgments_path, read_judgments, \
    write_judgments
from ragbench.judgments.agreement import refuse_untrusted
from ragbench.judgments.pool_file import read_pool


@dataclass(frozen=True)
class MergeResult:
    """What a merge did: the judgments file written, judgments ``added``, ``updated`` (another relevance) and
    ``unchanged``, and the rows left ``blank``."""

    path: Path
    added: int
    updated: int
    unchanged: int
    blank: int

    def describe(self) -> str:
        return (f"{self.path}: {self.added} judgment(s) added, {self.updated} updated, {self.unchanged} unchanged "
                f"({self.blank} blank row(s) left out)")


def target_path(spec: DatasetSpec) -> Path:
    """Where ``spec``'s dataset keeps its added judgments (:func:`ragbench.data.judged.judgments_path`)."""
    questions = None
    if spec.format == "folder":
        from ragbench.data.folder import questions_path

        questions = questions_path(spec)
    return judgments_path(Path(spec.path), spec.format, spec.split, questions)


def check_rows(path: Path, rows: list[tuple[int, dict]], ds: Dataset, judge: str,
               now: str) -> tuple[list[Judgment], int]:
    """The judgments of the filled ``rows`` of pool file ``path`` and the count of blank ones; the first problem
    is raised as one line naming ``path:line`` (see the module docstring)."""
    queries, docs = set(ds.queries["query_id"]), set(ds.corpus["doc_id"])
    own = ds.primary_qrels if ds.primary_qrels is not None else ds.qrels
    labelled = set(zip(own["query_id"], own["doc_id"]))
    out, problems, blank, seen = [], [], 0, {}
    for lineno, row in rows:
        where = f"{path}:{lineno}"
        try:
            grade = check_grade(row.get("relevance"), where)
            if grade is None:
                blank += 1
                continue
            q, d = str(row.get("query_id") or ""), str(row.get("doc") or "")
            if q not in queries:
                raise DatasetError(f"{where}: query {q!r} is not in dataset {ds.name}")
            if d not in docs:
                raise DatasetError(f"{where}: document {d!r} is not in dataset {ds.name}")
            if (q, d) in labelled:
                raise DatasetError(f"{where}: ({q}, {d}) is already labelled by the dataset's own labels; change it "
                                   "there (the questions or qrels file), not here")
            source = check_source(str(row.get("source") or PERSON), where)
            j = Judgment(q, d, grade, source, str(row.get("judge") or judge), str(row.get("judged_at") or now))
            if j.key in seen:
                raise DatasetError(f"{where}: ({q}, {d}) judged again by {source} (first on line {seen[j.key]})")
            seen[j.key] = lineno
            out.append(j)
        except DatasetError as e:
            problems.append(str(e))
    if problems:
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise RagbenchError(problems[0] + more)
    return out, blank


def merge_pool(pool_path: Path, ds: Dataset, spec: DatasetSpec, judge: str, *, fmt: str | None = None,
               now: datetime | None = None, store=None, force: bool = False) -> MergeResult:
    """Store the filled rows of ``pool_path`` as judgments of ``ds`` (loaded from ``spec``) by ``judge`` (see the
    module docstring); returns what changed. Rows of an assessor are refused, unless ``force``, when its latest
    agreement with people in ``store`` is below κ 0.4 (:func:`ragbench.judgments.agreement.refuse_untrusted`)."""
    stamp = (now or datetime.now(timezone.utc)).isoformat(timespec="seconds")
    incoming, blank = check_rows(Path(pool_path), read_pool(pool_path, fmt), ds, judge, stamp)
    refuse_untrusted(store, Path(pool_path), incoming, ds.name, force)
    target = target_path(spec)
    stored = {j.key: j for _, j in read_judgments(target)}
    added = updated = unchanged = 0
    for j in incoming:
        old = stored.get(j.key)
        if old is not None and old.relevance == j.relevance:
            unchanged += 1
            continue
        added += old is None
        updated += old is not None
        stored[j.key] = j
    if added or updated or not target.is_file():
        write_judgments(target, list(stored.values()))
    return MergeResult(target, added, updated, unchanged, blank)
