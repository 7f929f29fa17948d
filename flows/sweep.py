"""The nightly sweep as a Prefect flow: every library stage runs as a Prefect task.

Runs in Prefect's ephemeral mode (no server) by default, or against a server when ``PREFECT_API_URL`` is set.
``python -m flows.sweep --serve configs/scifact.yaml`` serves it on a nightly cron (02:00 UTC) without a work pool.

What Prefect shows of a sweep: the flow run is named after the sweep (``<sweep name>-<time>`` at start, the sweep
id once it is known), every task after what it does (``embed recursive 128 tok, overlap 0 × all-MiniLM-L6-v2``,
``evaluate ... | all-MiniLM-L6-v2 | hybrid RRF``; a stage its budget did not start, and every stage after it,
completes in a state named "Not run", not Failed), ragbench's log lines are the run's logs, and the run publishes
artifacts: the leaderboard with CIs and the configs tied with the best (markdown), a table per chunker, and links to
the MLflow parent run and the HTML report.
"""

from __future__ import annotations

import argparse
import re
from datetime import datetime, timezone
from pathlib import Path

from flows.settings import configure_prefect

configure_prefect()

from prefect import flow, task  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402
from prefect.states import Completed  # noqa: E402
from prefect.task_runners import ThreadPoolTaskRunner  # noqa: E402

from ragbench.config import load_config  # noqa: E402
from ragbench.core.progress import console, log  # noqa: E402
from ragbench.core.retry import is_transient  # noqa: E402
from ragbench.core.settings import Settings  # noqa: E402
from ragbench.core.workers import DaskWorkers  # noqa: E402
from ragbench.results.outcomes import SweepResult  # noqa: E402
from ragbench.sweep import Published, SweepOptions, publish_sweep, run_sweep, sweep_settings  # noqa: E402
from ragbench.sweep.budget import with_budget  # noqa: E402
from ragbench.sweep.runner import NotRun, UpstreamFailed  # noqa: E402
from ragbench.sweep.up_to_date import up_to_date  # noqa: E402


def _retry_transient(task_, task_run, state) -> bool:
    """Retry only errors that a second try can fix (a server timeout), never a bad config or a missing model."""
    try:
        state.result()
    except Exception as e:
        return is_transient(e)
    return False


#: What each sweep run in this process published (sweep id -> Published): a flow returns only its SweepResult.
PUBLISHED: dict[str, Published] = {}

#: Worker threads of a sweep's flow. A submitted task holds a thread from the moment it is taken, also while it
#: waits for its upstream tasks or for the model slot, so there are more threads than cores; what actually
#: computes is bounded by the library (one neural model at a time: ragbench.sweep.work.MODEL_SLOTS) and
#: by the GIL for the pure-Python stages.
SWEEP_TASK_THREADS = 4


class PrefectStageRunner:
    """Runs each library stage as a Prefect task named after what it does (the library's own content-addressed
    cache does the caching), and names the flow run after the sweep id once the sweep knows it.

    :meth:`submit` hands the task to the flow's task runner and returns at once; futures passed as arguments or in
    ``wait_for`` become the task run's upstream dependencies (its ``task_inputs``: the edges of the UI's graph)."""

    @staticmethod
    def _task(name, fn):
        def stage(*args, _after=(), **kwargs):
            """``fn``, unless the sweep chose not to run it or a stage before it (its inputs and ``_after``, the
            upstream stages' values): then the task completes in a state named "Not run" instead of failing."""
            skipped = next((v for v in (*args, *kwargs.values(), *_after) if isinstance(v, _Skipped)), None)
            if skipped is not None:
                return skipped.state()
            try:
                return fn(*args, **kwargs)
            except NotRun as e:
                return _Skipped(e).state()

        return task(stage, name=name.split(" ", 1)[0], task_run_name=lambda: name, retries=2,
                    retry_delay_seconds=[5, 30], retry_condition_fn=_retry_transient, cache_policy=NO_CACHE,
                    persist_result=False)

    def run(self, name, fn, /, *args, **kwargs):
        return _Skipped.unwrap(self._task(name, fn)(*args, **kwargs))

    def submit(self, name, fn, /, *args, wait_for=(), **kwargs):
        args = tuple(a.future if isinstance(a, _Stage) else a for a in args)
        kwargs = {k: v.future if isinstance(v, _Stage) else v for k, v in kwargs.items()}
        # the stages waited for are passed as values (resolved by Prefect, drawn as edges) so that a stage after
        # one that did not run does not run either
        after = [w.future if isinstance(w, _Stage) else w for w in wait_for]
        return _Stage(self._task(name, fn).submit(*args, _after=after, **kwargs))

    def sweep_started(self, sweep_id: str, sweep_name: str) -> None:
        """Rename the flow run to the sweep id (a resumed sweep keeps its id) and say where to watch it."""
        from prefect.client.orchestration import get_client
        from prefect.runtime import flow_run

        try:
            with get_client(sync_client=True) as client:
                client.update_flow_run(flow_run_id=flow_run.id, name=sweep_id)
        except Exception as e:  # the name is a convenience; the sweep goes on
            log.warning("Prefect: could not name the flow run %s: %s", sweep_id, e)
        url = flow_run.ui_url
        if url and not url.startswith("None"):  # no server, no UI: Prefect builds "None/flow-runs/..."
            console.print(f"Prefect flow run {sweep_id}: {url}", highlight=False)
        else:
            console.print(f"Prefect flow run {sweep_id}: ephemeral (no server, no UI; set PREFECT_API_URL to "
                          "watch runs in a Prefect UI)", highlight=False)


class _Skipped:
    """The value of a task that did not run by the sweep's choice (:class:`~ragbench.sweep.runner.NotRun`, its
    budget), or after one that did not: the task run completes in a state named "Not run" — not Failed, nor
    NotReady, which a nightly schedule's alerts would take for a broken sweep — and reading its value raises the
    original error again, so the library records its configs as the plain runner does."""

    def __init__(self, error: NotRun):
        self.error = error

    def state(self):
        return Completed(name="Not run", message=str(self.error), data=self)

    @staticmethod
    def unwrap(value):
        if isinstance(value, _Skipped):
            raise value.error
        return value


class _Stage:
    """A submitted task's future; a task that never ran because an upstream task failed (Prefect leaves it
    ``Pending``/``NotReady``) raises the library's :class:`~ragbench.sweep.runner.UpstreamFailed`, one that did
    not run by the sweep's choice its :class:`~ragbench.sweep.runner.NotRun`."""

    def __init__(self, future):
        self.future = future

    def result(self):
        try:
            value = self.future.result()
        except Exception as e:
            state = self.future.state
            if state.is_pending() or state.name == "NotReady":
                raise UpstreamFailed(f"{self.future.task_run_id}: not run, a task it depends on failed") from e
            raise
        return _Skipped.unwrap(value)


def _flow_run_name() -> str:
    """``<sweep name>-<UTC time>``: the name a run has until the sweep id is known."""
    from prefect.runtime import flow_run

    try:
        name = load_config(flow_run.parameters["config_path"]).name
    except Exception:  # an unreadable config fails in the flow itself, with its file:line message
        name = "ragbench-sweep"
    return f"{name}-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}"


def _attach_run_logs():
    """Send ragbench's log lines to the Prefect run's logs (the UI's Logs tab) while the flow runs; returns the
    handler to detach. Attached here rather than through ``PREFECT_LOGGING_EXTRA_LOGGERS`` because a worker's
    flow process has configured logging before it imports this file."""
    from prefect.logging.handlers import APILogHandler

    handler = APILogHandler()
    log.addHandler(handler)
    return handler


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "x"


def publish_artifacts(published: Published) -> int:
    """The sweep's Prefect artifacts: the leaderboard (markdown: CIs, marks, the configs tied with the best), one
    table per chunker, and links to the MLflow parent run and the HTML report. Returns how many were created."""
    from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact

    from ragbench.reporting.render_markdown import artifact_markdown

    report = published.report
    if report is None:
        return 0
    name = _slug(report.sweep_name)
    links = [f"* HTML report: `{published.html}`"]
    if published.mlflow_url:
        links.append(f"* MLflow parent run: [{report.sweep_id}]({published.mlflow_url})")
    create_markdown_artifact(markdown=artifact_markdown(report, links),
                             key=f"ragbench-leaderboard-{name}", description=f"leaderboard of {report.sweep_id}")
    n = 1
    rows = report.board.dicts()  # the report's one leaderboard model
    for chunker in dict.fromkeys(r["chunker"] for r in rows):
        table = [{"rank": r["rank"], "model": r["model"], "retriever": r["retriever"],
                  report.primary: None if r.get(report.primary) is None else round(r[report.primary], 4),
                  "95% CI": "" if r.get(report.primary) is None else
                  f"{r[f'{report.primary}_ci_low']:.3f}–{r[f'{report.primary}_ci_high']:.3f}",
                  "vs best": r.get(f"{report.primary}_mark", "FAILED"), "config_id": r["config_id"]}
                 for r in rows if r["chunker"] == chunker]
        create_table_artifact(table=table, key=f"ragbench-{name}-{_slug(chunker)}",
                              description=f"{report.sweep_id}: configs chunked by {chunker}")
        n += 1
    if published.mlflow_url:
        create_link_artifact(link=published.mlflow_url, link_text=f"MLflow run {report.sweep_id}",
                             key=f"ragbench-mlflow-{name}", description="the sweep's MLflow parent run")
        n += 1
    if published.html:
        create_link_artifact(link=Path(published.html).resolve().as_uri(), link_text="HTML report",
                             key=f"ragbench-report-{name}", description="the self-contained HTML report (local file)")
        n += 1
    return n


@flow(name="ragbench-sweep", flow_run_name=_flow_run_name, log_prints=True,
      task_runner=ThreadPoolTaskRunner(max_workers=SWEEP_TASK_THREADS))
def sweep_flow(config_path: str, home: str | None = None, publish: bool = True, fresh: bool = False,
               workers=None, budget: str | None = None, budget_from: float | None = None,
               again: bool = False) -> SweepResult:
    """Run (or resume) the sweep described by ``config_path``, then publish its report and artifacts (``fresh``:
    re-evaluate every config; ``workers``: where embedding shards run, by default a Dask scheduler named by
    ``RAGBENCH_DASK_ADDRESS`` when set, else here; ``budget``: a duration that overrides the file's ``budget:``;
    ``budget_from``: the wall-clock time, :func:`time.time`, it counts from, the command's start; default: the
    sweep's). A sweep that is up to date (:mod:`ragbench.sweep.up_to_date`) returns the newest sweep's results and
    records nothing, unless ``again`` or ``fresh``."""
    handler, own = _attach_run_logs(), False
    try:  # whatever fails, even the checks below, the handler is detached: it would outlive the run otherwise
        cfg, settings = load_config(config_path), Settings.from_env()
        cfg = with_budget(cfg, budget or None)
        found = None if fresh or again else up_to_date(cfg, settings, home, report=publish)
        if found is not None:  # a night with nothing new: no second copy of the last sweep
            log.info("sweep %s: %s", cfg.name, found.sentence())
            PUBLISHED[found.sweep_id] = found.published()
            return found.result
        if workers is None and settings.dask_address is not None:  # a deployment: the scheduler comes from the env
            from ragbench.core.retry import check_server

            check_server(settings.dask_address, "Dask scheduler")  # seconds, one line, before any connect retries
            workers, own = DaskWorkers(address=settings.dask_address), True
        result = run_sweep(cfg, settings, SweepOptions(runner=PrefectStageRunner(), home=home, fresh=fresh,
                                                    workers=workers, budget_from=budget_from, publish_after=publish))
        if publish:
            published = publish_sweep(result.sweep_id, sweep_settings(cfg, settings, home), mlflow=cfg.output.mlflow)
            PUBLISHED[result.sweep_id] = published  # the CLI prints where the report and the MLflow run are
            try:
                publish_artifacts(published)
            except Exception as e:  # artifacts are a view of results that are safe in DuckDB
                log.warning("Prefect: could not publish artifacts: %s", e)
        return result
    finally:
        log.removeHandler(handler)
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
