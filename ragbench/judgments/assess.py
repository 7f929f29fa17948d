"""``judge assess``: an LLM assessor fills a pool file's blank ``relevance`` after it has been checked against people.

1. **Calibration.** The assessor grades a seeded sample (:func:`ragbench.judgments.agreement.calibration_sample`)
   of pairs people judged: the dataset's own labels, the judgments a person merged before, and the pool rows a
   person filled (``source`` blank or ``person``). Cohen's κ and the confusion matrix are stored in DuckDB
   (:meth:`ragbench.results.store.ResultStore.record_agreement`), so the report shows them and ``judge merge``
   can refuse the grades of an assessor below κ 0.4 (:func:`ragbench.judgments.agreement.assessor_trusted`).
2. **Grading.** Every pool row with a blank relevance gets the assessor's grade, ``source = assessor:<model>``,
   ``judge`` = the model, ``judged_at`` = now; rows a person filled are kept as they are. The result is written
   to ``--out`` (default: ``<pool>.assessed.<suffix>`` beside it), in the pool's format.

A pair the assessor left **ungraded** (twice a reply that is not a grade, :class:`~ragbench.judgments.assessor.
Assessor`) does not end the run: a calibration pair is left out of the agreement, a pool row keeps its blank
relevance (a rerun grades it again; grades are cached, so only those are asked), and both are counted in the result.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import polars as pl

from ragbench.core.errors import RagbenchError
from ragbench.core.progress import progress
from ragbench.data.dataset import Dataset
from ragbench.judgments.agreement import Agreement, calibration_sample, measure, people_pairs
from ragbench.judgments.assessor import PROMPT_VERSION, Assessor, AssessorError
from ragbench.judgments.pool_file import pool_rows, read_pool, write_pool

#: pairs people judged that the assessor grades before its grades count (``--sample``)
DEFAULT_SAMPLE = 60


@dataclass(frozen=True)
class AssessRequest:
    """What ``judge assess`` does: the ``pool`` file (``fmt``: its format, None by suffix), where to write
    (``out``; None: ``<pool>.assessed.<suffix>``; an existing file only with ``force``), and the calibration
    sample's size and seed."""

    pool: Path
    out: Path | None = None
    sample: int = DEFAULT_SAMPLE
    seed: int = 0
    force: bool = False
    fmt: str | None = None


@dataclass(frozen=True)
class AssessResult:
    """What an assessment did: the file written, the :class:`Agreement` measured, the rows ``graded`` by the
    assessor (``cached`` of them from the grade cache), the rows a person had filled (``kept``), the grading's
    wall ``seconds``, and the pairs left ungraded: pool rows left blank (``ungraded``) and calibration pairs left
    out of the agreement (``ungraded_calibration``)."""

    out: Path
    agreement: Agreement
    graded: int
    cached: int
    kept: int
    seconds: float
    ungraded: int = 0
    ungraded_calibration: int = 0

    def describe(self) -> str:
        text = (f"wrote {self.out}: {self.graded} row(s) graded by {self.agreement.model} ({self.cached} from the "
                f"cache), {self.kept} filled by a person kept")
        if self.ungraded or self.ungraded_calibration:
            text += (f"; ungraded (twice a reply that is not a grade): {self.ungraded} row(s) left blank, "
                     f"{self.ungraded_calibration} calibration pair(s) left out of the agreement; rerun to ask "
                     "them again")
        return text


def default_out(pool: Path) -> Path:
    """``pool.csv`` -> ``pool.assessed.csv`` beside it."""
    pool = Path(pool)
    return pool.with_name(f"{pool.stem}.assessed{pool.suffix or '.csv'}")


def person_labels(dataset: Dataset, judgments: list) -> pl.DataFrame:
    """The labels people gave: the dataset's own qrels (never the assessor's judgments folded into them) and the
    merged judgments whose source is ``person`` (:class:`ragbench.data.judged.Judgment`), the dataset's own
    winning."""
    own = dataset.primary_qrels if getattr(dataset, "primary_qrels", None) is not None else dataset.qrels
    own = own.select("query_id", "doc_id", pl.col("relevance").cast(pl.Int64))
    people = pl.DataFrame({"query_id": [j.query_id for j in judgments if j.source == "person"],
                           "doc_id": [j.doc for j in judgments if j.source == "person"],
                           "relevance": [j.relevance for j in judgments if j.source == "person"]},
                          schema={"query_id": pl.String, "doc_id": pl.String, "relevance": pl.Int64})
    return pl.concat([own, people.join(own, on=["query_id", "doc_id"], how="anti")])


def assess_pool(assessor: Assessor, dataset: Dataset, request: AssessRequest, store, *,
                judgments: list | None = None, now: datetime | None = None) -> AssessResult:
    """Calibrate ``assessor`` on the pairs people judged, store its agreement in ``store``, then grade the blank
    rows of ``request.pool`` and write them (see the module docstring). ``judgments``: the dataset's merged
    judgments (:func:`ragbench.data.judged.read_judgments`), whose ``person`` rows join the calibration pairs."""
    r = request
    out = Path(r.out) if r.out is not None else default_out(r.pool)
    if out.exists() and not r.force:
        raise RagbenchError(f"{out} exists: not overwritten; pass --force to replace it, or --out another file")
    if r.sample < 1:
        raise RagbenchError(f"--sample must be at least 1, got {r.sample}")
    raw = [row for _, row in read_pool(r.pool, r.fmt)]
    rows = pool_rows(r.pool, r.fmt)
    pairs = people_pairs(dataset, raw, person_labels(dataset, judgments or []))
    sample = calibration_sample(pairs, r.sample, r.seed)
    t0 = time.perf_counter()
    with progress("assessor: pairs people judged", len(sample)) as advance:
        checked = assessor.grade_all([(p.question, p.passage) for p in sample], advance)
    graded_sample = [(p, g) for p, g in zip(sample, checked) if not g.ungraded]
    if sample and not graded_sample:
        raise AssessorError(f"the assessor graded none of the {len(sample)} calibration pair(s): every reply was "
                            "not a grade, twice (see the warnings); try another --model or --endpoint")
    stamp = now or datetime.now(timezone.utc)
    timed = [g.seconds for _, g in graded_sample if g.seconds > 0]
    agreement = measure(assessor.model, PROMPT_VERSION, (dataset.name, dataset.fingerprint),
                        [p for p, _ in graded_sample], [g.grade for _, g in graded_sample], measured_at=stamp,
                        seconds_per_pair=sum(timed) / len(timed) if timed else None, seed=r.seed)
    store.record_agreement(agreement)
    blank = [i for i, row in enumerate(rows) if row.relevance is None]
    with progress("assessor: pool rows", len(blank)) as advance:
        grades = assessor.grade_all([(rows[i].question, rows[i].passage) for i in blank], advance)
    when = stamp.isoformat(timespec="seconds")
    for i, g in zip(blank, grades):
        if not g.ungraded:  # an ungraded row keeps its blank relevance
            rows[i] = replace(rows[i], relevance=g.grade, source=assessor.source, judge=assessor.model,
                              judged_at=when)
    write_pool(rows, out, r.fmt)
    ungraded = sum(g.ungraded for g in grades)
    return AssessResult(out, agreement, len(blank) - ungraded, sum(g.cached for g in grades), len(rows) - len(blank),
                        time.perf_counter() - t0, ungraded, len(sample) - len(graded_sample))
