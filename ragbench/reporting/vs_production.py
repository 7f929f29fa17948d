"""Against production: the sweep's best config against the live promotion, on the same queries (a report section).

When a promotion is live on the sweep's dataset fingerprint, the sweep's best config (on the report's primary
measure) is paired by ``query_id`` with the production config's values: from this sweep if it evaluated the
production config, else from the newest finished sweep on the same fingerprint that did
(:meth:`~ragbench.results.store.ResultStore.latest_sweep_with_config`, as the promotion gate does). The section
gives the mean difference ``best − production``, the paired p-value (the report's test and resamples) and W/T/L,
then the promotion gate's verdict (:func:`ragbench.promotion.promotion_gate.check_promotion_gate`): the command
to promote, or why the gate would refuse. When nothing is live on this fingerprint it says so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ragbench.core.errors import RagbenchError
from ragbench.reporting.since import ConfigRef, PairedChange, StatOptions, paired_change
from ragbench.results.store import ResultStore


@dataclass(frozen=True)
class VsProduction:
    """The sweep's ``best`` against ``production`` (promoted from ``promoted_from`` at ``promoted_at``, its values
    read from ``values_from``): ``change`` is ``best − production`` on ``primary``; ``allowed`` and ``gate`` are
    the promotion gate's verdict and evidence; ``command`` promotes the best (None when the gate refuses)."""

    sweep_id: str
    primary: str
    test: str
    best: ConfigRef
    production: ConfigRef
    promoted_from: str
    promoted_at: str
    values_from: str
    change: PairedChange
    allowed: bool
    gate: str
    command: str | None

    @property
    def same_config(self) -> bool:
        """True when the sweep's best is the config in production."""
        return self.best.config_id == self.production.config_id

    def sentence(self) -> str:
        """The comparison in words."""
        c = self.change
        if self.same_config:
            head = f"The best, {self.best.label}, is the config in production"
        else:
            head = (f"Best {self.best.label} vs production {self.production.label}: {c.mean_a:.4f} vs "
                    f"{c.mean_b:.4f}, mean difference {c.mean_diff:+.4f} over {c.n} paired queries, paired "
                    f"{self.test} p = {c.p_value:.4g}, W/T/L {c.wins}/{c.ties}/{c.losses}")
        verdict = f"to promote: `{self.command}`" if self.command else f"the gate would refuse: {self.gate}"
        return f"{head}; {verdict}"

    def as_dict(self) -> dict:
        """The JSON form (``vs_production`` of the JSON report)."""
        return {"sweep_id": self.sweep_id, "primary": self.primary, "test": self.test, "best": asdict(self.best),
                "production": asdict(self.production), "promoted_from": self.promoted_from,
                "promoted_at": self.promoted_at, "values_from": self.values_from, **asdict(self.change),
                "same_config": self.same_config, "gate_allows": self.allowed, "gate": self.gate,
                "command": self.command}


def vs_production(store: ResultStore, sweep_id: str, best: ConfigRef, primary: str,
                  stats: StatOptions) -> tuple[VsProduction | None, str]:
    """``(section, sentence)``, or ``(None, why)`` when no promotion is live on the sweep's dataset fingerprint
    or production was never evaluated there."""
    from ragbench.promotion.promotion_gate import check_promotion_gate

    sweep = store.sweep(sweep_id) or {}
    fp = sweep.get("dataset_fingerprint")
    live = store.promotion_records(active=True)
    if not live:
        return None, "nothing is in production yet; the first promotion needs the best or a config tied with it"
    p = live[0]
    if p.dataset_fingerprint != fp:
        return None, (f"no promotion is live on dataset {fp}: production ({p.label}) was promoted on "
                      f"{p.dataset_fingerprint}")
    values_from = store.latest_sweep_with_config(p.config_id, fp, prefer=sweep_id)
    if values_from is None:
        return None, f"production ({p.label}) was never evaluated on dataset {fp}"
    prod_values = store.measure_values(values_from, p.config_id, primary)
    if prod_values.is_empty():
        return None, f"production ({p.label}) has no {primary} values in sweep {values_from}"
    change = paired_change(store.measure_values(sweep_id, best.config_id, primary), prod_values, stats,
                           (best.config_id, f"production:{p.config_id}"))
    try:
        decision = check_promotion_gate(store, sweep_id, best.config_id, primary=primary, alpha=stats.alpha)
        allowed, gate = decision.allowed, decision.evidence
    except (RagbenchError, ValueError) as e:  # PromotionRefused included: the refusal is the answer
        allowed, gate = False, str(e)
    prod = ConfigRef(p.config_id, p.name, p.label, change.mean_b)
    section = VsProduction(sweep_id, primary, stats.test, best, prod, p.sweep_id, f"{p.promoted_at:%Y-%m-%d %H:%M %Z}",
                           values_from, change, allowed, gate,
                           f"ragbench promote {sweep_id} {best.config_id}" if allowed else None)
    return section, section.sentence()
