"""The nightly sweep as a Prefect flow: every library stage runs as a Prefect task.

Runs in Prefect's ephemeral mode (no server) by default, or against a server when ``PREFECT_API_URL`` is set.
``python -m flows.sweep --serve configs/scifact.yaml`` serves it on a nightly cron (02:00 UTC) without a work pool.
"""

from __future__ import annotations

import argparse

from flows.settings import configure_prefect

configure_prefect()

from prefect import flow, task  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402

from ragbench.config import load_config  # noqa: E402
from ragbench.core.retry import is_transient  # noqa: E402
from ragbench.core.settings import Settings  # noqa: E402
from ragbench.core.workers import DaskWorkers  # noqa: E402
from ragbench.results.outcomes import SweepResult  # noqa: E402
from ragbench.sweep import run_sweep  # noqa: E402


def _retry_transient(task_, task_run, state) -> bool:
    """Retry only errors that a second try can fix (a server timeout), never a bad config or a missing model."""
    try:
        state.result()
    except Exception as e:
        return is_transient(e)
    return False


class PrefectStageRunner:
    """Runs each library stage as a Prefect task (the library's own content-addressed cache does the caching)."""

    def run(self, name, fn, /, *args, **kwargs):
        stage = task(fn, name=name, retries=2, retry_delay_seconds=[5, 30], retry_condition_fn=_retry_transient,
                     cache_policy=NO_CACHE, persist_result=False)
        return stage(*args, **kwargs)


@flow(name="ragbench-sweep", log_prints=True)
def sweep_flow(config_path: str, home: str | None = None, fresh: bool = False, workers=None) -> SweepResult:
    """Run (or resume) the sweep described by ``config_path`` (``fresh``: re-evaluate every config; ``workers``:
    where embedding shards run)."""
    cfg, settings = load_config(config_path), Settings.from_env()
    own = workers is None and settings.dask_address is not None  # a deployment: the scheduler comes from the env
    if own:
        workers = DaskWorkers(address=settings.dask_address)
    try:
        return run_sweep(cfg, settings, runner=PrefectStageRunner(), home=home, fresh=fresh, workers=workers)
    finally:
        if own:
            workers.close()


def main() -> None:  # pragma: no cover - exercised by hand / by the scheduling docs
    parser = argparse.ArgumentParser(description="Run the ragbench sweep flow once, or serve it on a schedule.")
    parser.add_argument("config_path")
    parser.add_argument("--serve", action="store_true", help="serve with a cron schedule instead of running once")
    parser.add_argument("--cron", default="0 2 * * *", help="cron for --serve (default: 02:00 daily)")
    args = parser.parse_args()
    if args.serve:
        sweep_flow.serve(name="ragbench-nightly-sweep", cron=args.cron, parameters={"config_path": args.config_path})
    else:
        sweep_flow(args.config_path)


if __name__ == "__main__":
    main()
