"""MLflow tracking: one parent run per sweep (named by the sweep id), one child run per config. Runs are found
again by tag, so a resumed sweep reuses its parent run and never creates a second child for a finished config.

A child run carries the same params whatever its chunker or retriever (:func:`uniform_params`: ``chunker``,
``chunk_size``, ``chunk_overlap``, ``embedder`` = ``none`` for BM25, ``retriever``, ``fusion``, ``rerank``, ...;
an absent value is ``none``, never ``null``), its measures under their keys (``ndcg_at_10``: the names DuckDB and
the CLI use), the per-query results as a table MLflow previews (``per_query.json``, :meth:`MlflowClient.log_table`)
beside the Parquet files, and the full spec as ``config.json``.

Tracking is for browsing; DuckDB is the record. If MLflow is unreachable the sweep goes on, says so, and the
results can be uploaded later with ``ragbench sync-mlflow``.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from ragbench.core.locks import file_lock
from ragbench.core.measure_keys import measure_key
from ragbench.core.progress import log

SWEEP_TAG, CONFIG_TAG = "ragbench.sweep_id", "ragbench.config_id"

EXPERIMENT_DESCRIPTION = """ragbench sweep `{experiment}`: which retrieval configuration (chunking x embedding
model x retriever) wins on labelled queries.

* One parent run per sweep, named by the sweep id. It carries the best config's metrics (`best_*`), the configs
  tied with it (`ragbench.tied_with_best`), the HTML report (`report/report.html`) and plots; its params are the
  sweep file's grid (`chunkers`, `models`, `retrievers`, `k`, `grid.*`).
* One child run per config of the sweep, named by the config's label; a config an earlier sweep evaluated is logged
  again without being recomputed, tagged `ragbench.computed_in_sweep`. Each carries `rank`, `<primary>_ci_low`,
  `<primary>_ci_high`, `p_vs_best` and `tied_with_best`. Params are the same on every run (`chunker`, `chunk_size`,
  `chunk_overlap`, `embedder` = `none` for BM25, `retriever`, `fusion`, `rerank`, ...). Metrics use the keys of
  DuckDB and the CLI: `ndcg_at_10` is nDCG@10, e.g. search `metrics.ndcg_at_10 > 0.7 and params.retriever = 'hybrid'`.
* `per_query.json` (previewable), `per_query.parquet` and `rankings.parquet` hold every query.
"""


def default_tracking_uri(settings) -> str:
    """The settings' MLflow URI (``$MLFLOW_TRACKING_URI``) or a SQLite store under the ragbench home."""
    return settings.mlflow_tracking_uri or f"sqlite:///{(Path(settings.home) / 'mlflow.db').resolve()}"


def sqlite_store_path(uri: str) -> Path | None:
    """The file of a ``sqlite:///`` tracking URI (None for a server or another backend)."""
    return Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None


def check_mlflow_store(settings) -> None:
    """Raise :class:`~ragbench.core.errors.StoreDamagedError` naming the settings' SQLite MLflow store (and the
    repair) when it cannot be read; a server checks its own store."""
    from ragbench.core.errors import StoreDamagedError
    from ragbench.results.store_connection import sqlite_damage

    path = sqlite_store_path(default_tracking_uri(settings))
    cause = sqlite_damage(path) if path is not None else None
    if cause is not None:
        raise StoreDamagedError(path, cause)


NONE = "none"  # an absent param value: one spelling, never "null" or "None"


def _param(v: Any) -> str:
    if v is None:
        return NONE
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, (list, tuple)):
        return ",".join(_param(x) for x in v) or NONE
    return str(v)[:6000]


def flatten(d: dict, prefix: str = "") -> dict[str, str]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": "1"}`` (MLflow params are flat strings; None becomes ``none``)."""
    out: dict[str, str] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = _param(v)
    return out


def uniform_params(spec: dict, name: str | None = None) -> dict[str, str]:
    """The params every child run has, whatever its chunker or retriever, so MLflow's runs table, filters and
    parallel coordinates line up: ``chunker`` (kind), ``chunk_size``, ``chunk_unit``, ``chunk_overlap``,
    ``chunk_prefix``, ``embedder`` (model, ``none`` for BM25), ``retriever`` (kind), ``fusion``, ``rerank``,
    ``parents``, ``filter``, ``bm25_k1``, ``bm25_b``, ``dense_search`` (``exact``/``hnsw``), ``hnsw_ef``,
    ``depth``, ``hnsw_m`` and ``label`` (the config in words). Absent values are ``none``.

    What a kind means by size, overlap, BM25 or dense search comes from its spec class
    (:meth:`ChunkerSpec.tracking_params`, :meth:`RetrieverSpec.tracking_params`); a stored spec this process
    cannot parse (a kind registered by another program) falls back to the fields its dict names."""
    from ragbench.config.labels import ConfigLabels

    ch, emb, r, index = (spec.get(k) or {} for k in ("chunker", "embedder", "retriever", "index"))
    uses_dense = bool(emb)
    first = _retriever_params(r)
    if not uses_dense:  # the dense settings of a config without an embedder mean nothing
        first.update(dense_search=None, hnsw_ef=None)
    rerank = r.get("rerank")
    parents = r.get("parents")
    filt = r.get("filter")
    return {k: _param(v) for k, v in {
        "label": ConfigLabels.from_stored(spec, name).text,
        "chunker": ch.get("kind"), **_chunker_params(ch),
        "chunk_prefix": ch.get("prefix"),
        "embedder": emb.get("model") if emb else None,
        "retriever": r.get("kind"), "fusion": first["fusion"],
        "rerank": f"{rerank.get('model', '?')}@{rerank.get('top_n', '?')}" if rerank else None,
        "parents": parents.get("mode") if parents else None,
        "filter": ",".join(f"{k}={v}" for k, v in filt.items()) if filt else None,
        "bm25_k1": first["bm25_k1"], "bm25_b": first["bm25_b"],
        "dense_search": first["dense_search"], "hnsw_ef": first["hnsw_ef"],
        "depth": r.get("depth"), "hnsw_m": index.get("hnsw_m") if index else None,
    }.items()}


def _chunker_params(ch: dict) -> dict[str, Any]:
    """``chunk_size``, ``chunk_unit``, ``chunk_overlap`` of a stored chunker spec, from its spec class."""
    from ragbench.chunking import CHUNKERS

    try:
        return CHUNKERS.parse(ch).tracking_params()
    except Exception:  # unknown kind or malformed: what the dict itself says
        return {"chunk_size": ch.get("size"), "chunk_unit": ch.get("unit"), "chunk_overlap": ch.get("overlap")}


def _retriever_params(r: dict) -> dict[str, Any]:
    """``fusion``, ``bm25_k1``, ``bm25_b``, ``dense_search``, ``hnsw_ef`` of a stored retriever spec."""
    from ragbench.retrieval import RETRIEVERS

    try:
        return dict(RETRIEVERS.parse(r).tracking_params())
    except Exception:  # unknown kind or malformed: what the dict itself says
        return {"fusion": r.get("fusion"), "bm25_k1": None, "bm25_b": None,
                "dense_search": "exact" if r.get("exact") else "hnsw",
                "hnsw_ef": None if r.get("exact") else r.get("hnsw_ef")}


def config_params(spec: dict, dataset_fingerprint: str, config_id: str, name: str | None = None) -> dict[str, str]:
    """The MLflow params of a config's child run: :func:`uniform_params` plus ``config_id``, ``config_name`` (the
    stored name) and ``dataset_fingerprint``. The full spec goes to the run as ``config.json``."""
    return {**uniform_params(spec, name), "config_id": config_id, "config_name": _param(name),
            "dataset_fingerprint": dataset_fingerprint}


def sweep_params(dataset_spec: dict, dataset_fingerprint: str) -> dict[str, str]:
    """The MLflow params of a sweep's parent run."""
    return flatten({"dataset": dataset_spec, "dataset_fingerprint": dataset_fingerprint})


def metric_key(name: str) -> str:
    """The MLflow metric name of a measure: its key (:func:`ragbench.core.measure_keys.measure_key`, ``ndcg_at_10``),
    the same name DuckDB and the CLI use."""
    return measure_key(name)


def with_questions(per_query: pl.DataFrame, texts: dict[str, str]) -> pl.DataFrame:
    """``per_query`` with a ``question`` column (the text of each query id, from
    :meth:`ragbench.results.store.ResultStore.query_texts`; null for an id without one), right after
    ``query_id``; unchanged when ``texts`` is empty."""
    if not texts or "query_id" not in per_query.columns:
        return per_query
    q = pl.DataFrame({"query_id": list(texts), "question": list(texts.values())},
                     schema={"query_id": pl.String, "question": pl.String})
    out = per_query.drop("question", strict=False).join(q, on="query_id", how="left", maintain_order="left")
    cols = [c for c in per_query.columns if c != "question"]
    at = cols.index("query_id") + 1
    return out.select([*cols[:at], "question", *cols[at:]])


def per_query_wide(per_query: pl.DataFrame) -> pl.DataFrame:
    """``query_id``, ``question`` (when the long table has one: :func:`with_questions`), ``query_class`` and one
    column per measure key (NaN for an unlabelled query: JSON has no NaN, so it becomes null), from the long
    ``query_id, query_class, measure, value`` table."""
    if per_query.is_empty():
        return pl.DataFrame({"query_id": [], "query_class": []}, schema={"query_id": pl.String,
                                                                         "query_class": pl.String})
    index = ["query_id", *(["question"] if "question" in per_query.columns else []), "query_class"]
    wide = (per_query.with_columns(pl.col("value").fill_nan(None))
            .pivot(on="measure", index=index, values="value", aggregate_function="first"))
    return wide.sort("query_id")


@dataclass(frozen=True)
class ConfigRun:
    """The MLflow child run of one config: under the sweep's ``parent_run_id``, tagged with the sweep and config
    ids, named for the config; ``spec`` and ``dataset_fingerprint`` give its params and ``config.json``."""

    parent_run_id: str
    sweep_id: str
    config_id: str
    name: str
    spec: dict
    dataset_fingerprint: str

    @property
    def params(self) -> dict[str, str]:
        """:func:`config_params` of the config."""
        return config_params(self.spec, self.dataset_fingerprint, self.config_id, self.name)


class Tracker:
    """Thin wrapper over ``MlflowClient`` with find-or-create semantics keyed by ragbench ids."""

    def __init__(self, tracking_uri: str, experiment: str, artifact_root: Path | None = None):
        from mlflow.tracking import MlflowClient

        self.uri = tracking_uri
        self.client = MlflowClient(tracking_uri=tracking_uri)
        exp = self.client.get_experiment_by_name(experiment)
        if exp is None:
            location = artifact_root.resolve().as_uri() if artifact_root and tracking_uri.startswith("sqlite") \
                else None
            self.experiment_id = self.client.create_experiment(experiment, artifact_location=location)
            tags = {}
        else:
            self.experiment_id = exp.experiment_id
            tags = exp.tags
        # MLflow 3 opens an experiment without a kind on its (empty) GenAI traces page; a description says what
        # the runs are and how to search them
        for key, value in (("mlflow.experimentKind", "custom_model_development"),
                           ("mlflow.note.content", EXPERIMENT_DESCRIPTION.format(experiment=experiment))):
            if key not in tags:
                self.client.set_experiment_tag(self.experiment_id, key, value)

    def _find(self, tags: dict[str, str]) -> Any | None:
        query = " and ".join(f"tags.`{k}` = '{v}'" for k, v in tags.items())
        runs = self.client.search_runs([self.experiment_id], filter_string=query, max_results=1,
                                       order_by=["attributes.start_time DESC"])
        return runs[0] if runs else None

    def sweep_run(self, sweep_id: str, name: str, params: dict[str, str]) -> str:
        """The sweep's parent run (found by its sweep-id tag, or created), named by the sweep id; ``name`` is the
        sweep's name (tag ``ragbench.sweep_name``)."""
        found = self._find({SWEEP_TAG: sweep_id, "ragbench.kind": "sweep"})
        if found:
            return found.info.run_id
        run = self.client.create_run(self.experiment_id, run_name=sweep_id,
                                     tags={SWEEP_TAG: sweep_id, "ragbench.kind": "sweep",
                                           "ragbench.sweep_name": name})
        self._log_params(run.info.run_id, params)
        return run.info.run_id

    def finished_child(self, sweep_id: str, config_id: str) -> str | None:
        found = self._find({SWEEP_TAG: sweep_id, CONFIG_TAG: config_id})
        return found.info.run_id if found and found.info.status == "FINISHED" else None

    def log_config(self, run: ConfigRun, metrics: dict[str, float], tables: dict[str, pl.DataFrame],
                   status: str = "FINISHED", extra_tags: dict[str, str] | None = None, known_new: bool = False) -> str:
        """Create (or reuse the unfinished) child run ``run`` for a config, log everything, and close it.

        Params are ``run.params``; ``tables`` named ``*.parquet`` or ``*.csv`` are logged as files, ``*.json`` as
        MLflow tables (previewed in the UI); ``run.spec`` becomes ``config.json``. Params and metrics go in the
        same ``log_batch`` calls. ``known_new``: the caller has just listed the sweep's children and this config has
        none, so it is created without searching for one.
        """
        parent_run_id, sweep_id, config_id, name = run.parent_run_id, run.sweep_id, run.config_id, run.name
        spec, params = run.spec, run.params
        found = None if known_new else self._find({SWEEP_TAG: sweep_id, CONFIG_TAG: config_id})
        if found and found.info.status == "FINISHED":
            return found.info.run_id
        run_id = found.info.run_id if found else self.client.create_run(
            self.experiment_id, run_name=params.get("label") or name,  # display only: the id is in the tags
            tags={"mlflow.parentRunId": parent_run_id, SWEEP_TAG: sweep_id, CONFIG_TAG: config_id,
                  "ragbench.kind": "config", **(extra_tags or {})}).info.run_id
        from mlflow.entities import Metric

        ts = int(time.time() * 1000)
        clean = [Metric(metric_key(k), float(v), ts, 0) for k, v in metrics.items() if v == v]
        self._log_batches(run_id, {} if found else params, clean)
        logged = {a.path for a in self.client.list_artifacts(run_id)} if found else set()
        with tempfile.TemporaryDirectory() as tmp:
            for fname, df in tables.items():
                path = Path(tmp) / fname
                if fname.endswith(".json"):
                    if fname not in logged:  # log_table appends to an existing file: a resumed run logs it once
                        self.client.log_table(run_id, data=df.to_pandas(), artifact_file=fname)
                    continue
                df.write_parquet(path) if fname.endswith(".parquet") else df.write_csv(path)
                self.client.log_artifact(run_id, str(path))
            if spec is not None:
                path = Path(tmp) / "config.json"
                path.write_text(json.dumps(spec, indent=2, sort_keys=True))
                self.client.log_artifact(run_id, str(path))
        self.client.set_terminated(run_id, status=status)
        return run_id

    def log_config_result(self, run: ConfigRun, *, metrics: dict[str, float], chunk_stats: dict[str, float],
                          n_queries: int, n_unlabelled: int, ms_per_query: float,
                          tables: dict[str, pl.DataFrame]) -> str:
        """A finished config as a child run: params = :func:`config_params`, metrics = means + ``chunkstat_*`` +
        counts. A ``per_query.parquet`` table (``query_id, query_class, measure, value``) is also logged as the
        previewable table ``per_query.json``, one row per query and one column per measure."""
        tables = dict(tables)
        if "per_query.parquet" in tables and "per_query.json" not in tables:
            tables["per_query.json"] = per_query_wide(tables["per_query.parquet"])
        return self.log_config(
            run, {**metrics, **{f"chunkstat_{k}": v for k, v in chunk_stats.items()}, "n_queries": n_queries,
                  "n_unlabelled": n_unlabelled, "retrieval_ms_per_query": ms_per_query}, tables)

    def log_config_failure(self, run: ConfigRun, error: str) -> str:
        """A failed config as a FAILED child run with its error in the ``ragbench.error`` tag."""
        from ragbench.results.outcomes import failure_status

        status = failure_status(error)
        if status != "failed":  # not run (over budget, screened out): a sweep chose not to start it, not a failure
            return self.log_config(run, {}, {}, status="KILLED", extra_tags={"ragbench.error": error,
                                                                              "ragbench.status": status})
        return self.log_config(run, {}, {}, status="FAILED", extra_tags={"ragbench.error": (error or "")[:5000]})

    def finish_sweep(self, run_id: str, metrics: dict[str, float], status: str = "FINISHED") -> None:
        from mlflow.entities import Metric

        ts = int(time.time() * 1000)
        if metrics:
            self.client.log_batch(run_id, metrics=[Metric(metric_key(k), float(v), ts, 0)
                                                   for k, v in metrics.items() if v == v])
        self.client.set_terminated(run_id, status=status)

    def log_sweep_summary(self, run_id: str, *, best_config_id: str, best_name: str, best_label: str,
                          best_metrics: dict[str, float], tied_with_best: list[str], description: str,
                          primary: str) -> None:
        """Put the answer on the sweep's parent run: the best config's metrics under the same keys as its child
        run (so the runs table compares sweeps by their best), which config that is, the configs tied with it and
        a markdown description (shown on the run's page)."""
        from mlflow.entities import Metric, RunTag

        ts = int(time.time() * 1000)
        metrics = [Metric(metric_key(k), float(v), ts, 0) for k, v in best_metrics.items()
                   if isinstance(v, (int, float)) and v == v]
        tags = [RunTag("ragbench.best_config_id", best_config_id), RunTag("ragbench.best_config", best_name),
                RunTag("ragbench.best_label", best_label), RunTag("ragbench.primary", primary),
                RunTag("ragbench.tied_with_best", "; ".join(tied_with_best)[:7000] or NONE),
                RunTag("mlflow.note.content", description[:60000])]
        for i in range(0, max(len(metrics), 1), 500):
            self.client.log_batch(run_id, metrics=metrics[i:i + 500], tags=tags if i == 0 else [])

    def _log_params(self, run_id: str, params: dict[str, str]) -> None:
        self._log_batches(run_id, params, [])

    def _log_batches(self, run_id: str, params: dict[str, str], metrics: list) -> None:
        """``params`` and ``metrics`` (``Metric``) in as few ``log_batch`` calls as MLflow's limits allow (100
        params and 500 metrics per call, as before); none when both are empty."""
        from mlflow.entities import Param

        items = [Param(k[:250], v) for k, v in params.items()]
        for i in range(max((len(items) + 99) // 100, (len(metrics) + 499) // 500)):
            self.client.log_batch(run_id, metrics=metrics[500 * i:500 * (i + 1)], params=items[100 * i:100 * (i + 1)])


def run_url(tracking_uri: str, experiment_id: str, run_id: str, ui_url: str | None = None) -> str | None:
    """The UI address of a run: under ``ui_url`` (``RAGBENCH_MLFLOW_UI_URL``) when set, else on the tracking server;
    None for a local store without a UI URL (nothing serves it until someone starts ``mlflow ui``)."""
    if ui_url:
        base = ui_url.rstrip("/")
    elif tracking_uri.startswith(("http://", "https://")):
        base = tracking_uri.rstrip("/")
    else:
        return None
    return f"{base}/#/experiments/{experiment_id}/runs/{run_id}"


def _probe(uri: str, timeout: float = 5.0) -> None:
    """Fail fast on an unreachable server (MLflow's own client would retry for minutes)."""
    import urllib.request

    with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout) as resp:
        if resp.status != 200:
            raise ConnectionError(f"MLflow health check answered {resp.status}")


def check_tracking_server(uri: str) -> None:
    """Raise :class:`~ragbench.core.retry.ServerUnreachable` (one line, in seconds) when ``uri`` names an MLflow
    server (http/https) or a PostgreSQL database that does not answer; a local store needs no check."""
    from ragbench.core.retry import check_server

    if uri.lower().startswith(("http://", "https://")):
        check_server(uri, "MLflow tracking server", http_path="/health")
    elif uri.lower().startswith(("postgresql", "postgres:")):
        check_server(uri, "MLflow database (PostgreSQL)")


def _seed(path: Path | None, folder: Path) -> bool:
    """A new SQLite store copied from the installed MLflow's empty one in ``folder``
    (:mod:`ragbench.results.mlflow_seed`); False when there is a store already, the URI is no SQLite file, or the
    copy failed (MLflow makes it)."""
    if path is None or path.exists():
        return False
    from ragbench.results.mlflow_seed import seed_store

    try:
        return seed_store(path, folder)
    except Exception as e:
        log.debug("MLflow: no template store (%s); MLflow creates the store", e)
        return False


def open_tracker(settings, experiment: str) -> Tracker | None:
    """A tracker, or None (with a warning) when MLflow cannot be reached: results still land in DuckDB."""
    from ragbench.core.errors import StoreDamagedError

    uri = default_tracking_uri(settings)
    try:
        check_mlflow_store(settings)
    except StoreDamagedError as e:  # one line naming the file and the repair, not MLflow's SQL
        log.warning("MLflow: %s; results go to DuckDB only meanwhile", e)
        return None
    try:
        check_tracking_server(uri)
        if uri.startswith(("http://", "https://")):
            _probe(uri)
        # a fresh SQLite store is migrated on first use: two sweeps doing it at once race (alembic_version exists)
        with file_lock(Path(settings.home) / "locks" / "mlflow-store.lock", "the MLflow store", wait_seconds=600,
                       on_wait=log.info):
            templates = Path(settings.tools_dir) / "mlflow"  # the empty store of each MLflow version
            seeded = _seed(sqlite_store_path(uri), templates)
            try:
                return Tracker(uri, experiment, artifact_root=Path(settings.home) / "mlartifacts")
            except Exception:
                if not seeded:
                    raise
                from ragbench.results.mlflow_seed import drop_template  # MLflow could not open the copy

                drop_template(templates)
                sqlite_store_path(uri).unlink(missing_ok=True)
                return Tracker(uri, experiment, artifact_root=Path(settings.home) / "mlartifacts")
    except Exception as e:  # unreachable server, locked store: degrade, don't lose the sweep
        log.warning("MLflow at %s is unavailable (%s); results go to DuckDB only — run `ragbench sync-mlflow` "
                    "later", uri, str(e).splitlines()[0][:200])
        return None
