"""The k sweep after the configs: end-to-end accuracy over context sizes k for the best config, in DuckDB and on
the sweep's parent run; copied from the sweep it came from when the best config's results were reused."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ragbench.core.errors import StoreBusyError
from ragbench.core.progress import log
from ragbench.data import Dataset
from ragbench.generation.stage import Generator, k_sweep_stage
from ragbench.results.outcomes import ConfigOutcome
from ragbench.results.store import ResultStore
from ragbench.sweep.recording import Best
from ragbench.sweep.tracking import SweepTracking


@dataclass(frozen=True)
class KSweep:
    """Where the k sweep reads and writes: this sweep (``sweep_id``, its ``writer``), the store it copies from,
    the tracking that logs its plot; ``generator`` answers (None: generation is off, no k sweep)."""

    ds: Dataset
    generator: Generator | None
    primary: str
    store: ResultStore
    writer: object
    sweep_id: str
    tracking: SweepTracking

    def run(self, outcomes: list[ConfigOutcome], stored: dict[str, tuple[str, str]], best: Best | None,
            k_sweep_spec) -> None:
        """The k sweep of the best finished config among ``outcomes`` (``stored``: ``config_id -> (source,
        origin)`` of the configs not evaluated now; ``best``: the best evaluated now; ``k_sweep_spec``: the
        generation's ``k_sweep`` setting, None for none)."""
        if self.generator is None or k_sweep_spec is None:
            return
        scored = [(o.metrics.get(self.primary, math.nan), o) for o in outcomes if o.status == "finished"]
        scored = [(v, o) for v, o in scored if not math.isnan(v)]
        if scored:
            top = max(scored, key=lambda vo: vo[0])[1]
            if top.config_id in stored and (best is None or top.metrics[self.primary] > best.value):
                if self._copied(stored[top.config_id][0], top.config_id):
                    return
                # its run is not in memory: the best config evaluated now gets the k sweep, if any was
                log.info("k sweep: no stored k sweep of the best config %s (from sweep %s)%s", top.label,
                         stored[top.config_id][1], "; --fresh computes one" if best is None else
                         f"; running it on {best.run_config.labels.text}, the best config evaluated now")
        if best is None:
            return
        try:
            table = k_sweep_stage(self.ds, best.run, best.judged, self.generator)
        except Exception as e:  # the configs' results stand; the k sweep is an extra view of the best one
            log.error("k sweep on %s failed: %s", best.run_config.labels.text, e)
            return
        self.writer.write_k_sweep(best.run_config.config_id, table)
        log.info("k sweep on %s:\n%s", best.run_config.labels.text, table.select("k", "accuracy", "answer_in_context",
                                                                          "recall"))
        self.tracking.log_k_sweep(table, best.run_config.labels.text)

    def _copied(self, source: str, config_id: str) -> bool:
        try:
            return source != self.sweep_id and self.store.copy_k_sweep(source, self.sweep_id, config_id)
        except StoreBusyError:  # a k sweep computed now goes to the spool instead
            return False
