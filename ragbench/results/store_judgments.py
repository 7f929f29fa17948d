"""The ``assessor_agreement`` table of the results file: how far each LLM assessor agreed with people, and when.

One row per measurement (an :class:`Agreement`, measured by :func:`ragbench.judgments.agreement.measure`): the
assessor's identity, its prompt version, the dataset, the number of pairs, Cohen's κ on relevant / not relevant and
the 4 × 4 confusion matrix of grades (JSON). ``judge merge`` reads the latest row of an assessor before it stores
its grades, and the report shows the latest row of each assessor of the sweep's dataset.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime

#: below this κ an assessor's grades are written but not merged without --force (Landis and Koch: "moderate")
KAPPA_THRESHOLD = 0.4


@dataclass(frozen=True)
class Agreement:
    """One measurement of an assessor against people: ``model`` (its identity), ``prompt_version``, the dataset,
    ``n`` pairs of which ``n_relevant`` a person judged relevant, ``kappa`` (None when it cannot be estimated:
    ``note`` says why), ``confusion`` (4 × 4, person grade rows 0-3, assessor grade columns 0-3),
    ``seconds_per_pair`` (the assessor's time per graded pair, cached ones at the time they took), ``seed``, when it
    was ``measured_at``, and ``binary``, the 2 × 2 table κ is computed from (``((both not, assessor only),
    (person only, both relevant))``, stored as ``relevant_table``)."""

    model: str
    prompt_version: int
    dataset_name: str
    dataset_fingerprint: str
    n: int
    n_relevant: int
    kappa: float | None
    confusion: tuple[tuple[int, ...], ...]
    measured_at: datetime
    seconds_per_pair: float | None = None
    seed: int = 0
    note: str = ""
    binary: tuple[tuple[int, int], tuple[int, int]] = field(default=((0, 0), (0, 0)), compare=False)

    @property
    def n_not_relevant(self) -> int:
        return self.n - self.n_relevant

    @property
    def trusted(self) -> bool:
        """κ measured and at least :data:`KAPPA_THRESHOLD`."""
        return self.kappa is not None and self.kappa >= KAPPA_THRESHOLD

    def describe(self) -> str:
        """One line: ``κ 0.52 on 40 pairs (22 relevant, 18 not) — trusted``."""
        head = (f"κ {self.kappa:.2f}" if self.kappa is not None else "κ not measurable") + \
            f" on {self.n} pairs ({self.n_relevant} relevant, {self.n_not_relevant} not)"
        if self.trusted:
            return f"{head}: trusted (κ >= {KAPPA_THRESHOLD})"
        why = self.note or f"κ below {KAPPA_THRESHOLD}"
        return f"{head}: not trusted ({why}); judge merge refuses its grades without --force"


class JudgmentsTable:
    """The ``assessor_agreement`` methods of :class:`ragbench.results.store.ResultStore` (they use its ``query``
    and ``transaction``)."""

    def record_agreement(self, agreement: Agreement) -> None:
        """Insert one :class:`Agreement` (rows are never replaced: the history
        stays)."""
        a = agreement
        with self.transaction() as con:
            con.execute("INSERT INTO assessor_agreement (measured_at, model, prompt_version, dataset_name, "
                        "dataset_fingerprint, n, n_relevant, kappa, confusion, relevant_table, seconds_per_pair, "
                        "seed, note) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [a.measured_at, a.model, a.prompt_version, a.dataset_name, a.dataset_fingerprint, a.n,
                         a.n_relevant, a.kappa, json.dumps([list(r) for r in a.confusion]),
                         json.dumps([list(r) for r in a.binary]), a.seconds_per_pair, a.seed, a.note])

    def assessor_agreements(self, *, model: str | None = None, dataset_name: str | None = None,
                            limit: int | None = None) -> list[Agreement]:
        """Stored :class:`Agreement` rows, newest first (of ``model`` and
        ``dataset_name`` when given; at most ``limit``)."""
        where, params = [], []
        if model is not None:
            where.append("model = ?")
            params.append(model)
        if dataset_name is not None:
            where.append("dataset_name = ?")
            params.append(dataset_name)
        sql = ("SELECT measured_at, model, prompt_version, dataset_name, dataset_fingerprint, n, n_relevant, kappa, "
               "confusion, relevant_table, seconds_per_pair, seed, note FROM assessor_agreement"
               + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY measured_at DESC"
               + (" LIMIT ?" if limit is not None else ""))
        rows = self.query(sql, params + ([limit] if limit is not None else []))
        out = []
        for r in rows.iter_rows(named=True):
            out.append(Agreement(
                model=r["model"], prompt_version=r["prompt_version"], dataset_name=r["dataset_name"] or "",
                dataset_fingerprint=r["dataset_fingerprint"] or "", n=r["n"], n_relevant=r["n_relevant"],
                kappa=r["kappa"], confusion=tuple(tuple(x) for x in json.loads(r["confusion"])),
                measured_at=r["measured_at"], seconds_per_pair=r["seconds_per_pair"], seed=r["seed"] or 0,
                note=r["note"] or "",
                binary=tuple(tuple(x) for x in json.loads(r["relevant_table"] or "[[0, 0], [0, 0]]"))))
        return out
