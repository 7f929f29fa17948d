"""The leaderboard model as JSON lines: one object per config, best first, keys sorted, NaN as null."""

from __future__ import annotations

from ragbench.config.labels import ConfigLabels
from ragbench.reporting.headline import build_headline
from ragbench.reporting.leaderboard import ranked
from ragbench.reporting.model import SweepReport
from ragbench.reporting.screening import screening_json
from ragbench.reporting.tables import to_json_lines
from ragbench.results.outcomes import SweepResult


def report_json(report: SweepReport) -> str:
    """The report's rows (:func:`ragbench.reporting.verdicts.report_rows`) plus ``primary`` (``{"measure": key,
    "value": mean}``), ``sweep_id``, whether the sweep finished (``finished, configs_done, configs_total``),
    ``since_previous`` (:meth:`~ragbench.reporting.since.SincePrevious.as_dict`; null with ``since_previous_reason``
    when there is no previous sweep) and ``vs_production`` (:meth:`~ragbench.reporting.vs_production.VsProduction.
    as_dict`; null with ``vs_production_reason`` when nothing live compares), ``questions_needed`` (per config tied
    with the best: :meth:`~ragbench.reporting.decision.QuestionsNeeded.as_dict`), ``label_coverage`` (judged@k per
    config and the warning: :meth:`~ragbench.reporting.label_coverage.LabelCoverage.as_dict`) and ``holdout_repeats``
    (:meth:`~ragbench.reporting.heldout.HoldoutRepeats.as_dict`; null without repeated splits), ``assessors``
    (each LLM assessor's κ with people and confusion matrix: :meth:`~ragbench.reporting.assessor.AssessorSection.
    as_dict`; null when none was measured) and ``headline`` (the words every surface leads with:
    :meth:`~ragbench.reporting.headline.Headline.as_dict`; null when no config ranked) and ``screening`` (a screened
    sweep's pool and each pair's screen score, Δ, p and Holm p: :func:`~ragbench.reporting.screening.screening_json`;
    null without a screen), one object per line."""
    done = report.completion.as_dict() if report.completion is not None else {}
    ranked_any = report.leaderboard().height > 0
    sections = {"headline": build_headline(report).as_dict() if ranked_any else None,"since_previous": report.since_previous.as_dict() if report.since_previous else None,
                "since_previous_reason": report.since_note,
                "vs_production": report.vs_production.as_dict() if report.vs_production else None,
                "vs_production_reason": None if report.vs_production else report.production_note,
                "questions_needed": [q.as_dict() for q in report.questions_needed],
                "label_coverage": report.label_coverage.as_dict() if report.label_coverage else None,
                "holdout_repeats": report.holdout_repeats.as_dict() if report.holdout_repeats else None,
                "pooled": report.pooled.as_dict() if report.pooled else None,
                "assessors": report.assessor.as_dict() if report.assessor else None,
                "screening": screening_json(report.screening)}
    return "\n".join(to_json_lines([{**r, "primary": {"measure": report.primary, "value": r.get(report.primary)},
                                     "sweep_id": report.sweep_id, **done, **sections}
                                    for r in report.board.dicts()]))


def json_lines(result: SweepResult) -> list[str]:
    """One JSON object per config of a sweep, best first by the primary measure: ``rank`` (null for a failed
    config), ``primary`` (``{"measure": key, "value": mean}``), ``config_id, name`` (stored), ``label`` (the name
    every surface shows), ``chunker, model, retriever, spec,
    status, error, metrics`` (every measure key: mean), ``n_queries, n_unlabelled, sweep_id, dataset_fingerprint``."""
    rows = []
    for rank, o in ranked(result.outcomes, result.primary):
        labels = ConfigLabels.from_stored(o.spec, o.name)
        rows.append({"rank": rank, "primary": {"measure": result.primary, "value": o.metrics.get(result.primary)},
                     "config_id": o.config_id, "name": o.name, "label": labels.text, "chunker": labels.chunker,
                     "model": labels.model,
                     "retriever": labels.retriever, "spec": o.spec, "status": o.status, "error": o.error,
                     "sweep_id": result.sweep_id, "dataset_fingerprint": result.dataset_fingerprint,
                     "metrics": dict(o.metrics), "n_queries": o.n_queries, "n_unlabelled": o.n_unlabelled})
    return to_json_lines(rows)
