"""The sweep: a decision (run, reuse, skip), a graph of stages, one evaluation per config, recorded as it finishes
(:func:`run_sweep`)."""

from ragbench.sweep.orchestrator import SweepOptions, experiment_name, run_sweep, sweep_settings
from ragbench.sweep.publish import Published, publish_sweep
from ragbench.sweep.runner import LocalRunner, StageRunner
from ragbench.sweep.stages import preflight
from ragbench.sweep.up_to_date import UpToDate, up_to_date

__all__ = ["LocalRunner", "Published", "StageRunner", "SweepOptions", "UpToDate", "experiment_name", "preflight",
           "publish_sweep", "run_sweep", "sweep_settings", "up_to_date"]
