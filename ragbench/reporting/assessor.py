"""The report's "LLM assessor" section: how far each assessor that graded pool rows of the sweep's dataset agreed
with people (the latest agreement of each model, stored by ``ragbench judge assess``:
:meth:`ragbench.results.store.ResultStore.assessor_agreements`).

Per assessor: Cohen's κ on relevant / not relevant over the pairs people judged, whether ``judge merge`` trusts its
grades (κ >= 0.4), and the 4 × 4 confusion matrix of grades 0-3 (person rows, assessor columns). The section is
absent when no assessor was measured on the dataset.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragbench.results.store_judgments import KAPPA_THRESHOLD, Agreement


@dataclass(frozen=True)
class AssessorSection:
    """The latest :class:`~ragbench.results.store_judgments.Agreement` of each assessor, newest first."""

    agreements: tuple[Agreement, ...]

    def lines(self, matrices: bool = True) -> list[str]:
        """Sentences: one per assessor (``SmolLM2…: κ 0.21 on 60 pairs …``), each followed by its confusion
        matrix when ``matrices``."""
        out = [f"LLM assessors against people (Cohen's κ, relevant / not; `judge merge` needs κ >= "
               f"{KAPPA_THRESHOLD}):"]
        for a in self.agreements:
            speed = f", {a.seconds_per_pair:.2f} s per pair" if a.seconds_per_pair is not None else ""
            out.append(f"  {a.model} (prompt v{a.prompt_version}): {a.describe()}{speed}")
            if matrices:
                out.append("    person \\ assessor   0    1    2    3")
                out += [f"    {g}                " + " ".join(f"{c:4d}" for c in row)
                        for g, row in enumerate(a.confusion)]
        return out

    def as_dict(self) -> list[dict]:
        return [{"model": a.model, "prompt_version": a.prompt_version, "n": a.n, "n_relevant": a.n_relevant,
                 "kappa": a.kappa, "trusted": a.trusted, "confusion": [list(r) for r in a.confusion],
                 "seconds_per_pair": a.seconds_per_pair, "measured_at": a.measured_at.isoformat(), "note": a.note}
                for a in self.agreements]


def assessor_section(store, dataset_name: str) -> AssessorSection | None:
    """The section for the sweep's dataset ``dataset_name`` (None when no assessor was measured on it)."""
    latest: dict[str, Agreement] = {}
    for a in store.assessor_agreements(dataset_name=dataset_name):
        latest.setdefault(a.model, a)  # newest first: the first of each model is its latest
    return AssessorSection(tuple(latest.values())) if latest else None
