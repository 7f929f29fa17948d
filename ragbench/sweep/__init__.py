"""The sweep: a plan per chunker, one evaluation per config, recorded as it finishes (:func:`run_sweep`)."""

from ragbench.sweep.orchestrator import experiment_name, run_sweep, sweep_settings
from ragbench.sweep.publish import Published, publish_sweep
from ragbench.sweep.runner import LocalRunner, StageRunner
from ragbench.sweep.stages import preflight

__all__ = ["LocalRunner", "Published", "StageRunner", "experiment_name", "preflight", "publish_sweep", "run_sweep",
           "sweep_settings"]
