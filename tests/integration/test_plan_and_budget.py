"""The plan before the run and a budget the sweep honours, on the demo with the static model (BM25 and dense).

``ragbench plan`` on a cold home says what the sweep then does (texts it embeds, configs it evaluates), and the
sweep keeps the rate it measured as the model's calibration (and makes one when it was not planned first); on the
warm home the plan says nothing is left (0 texts to embed, every config reused). ``--recalibrate`` measures anew over
a stored rate. A budget that the dense configs' embedding would overrun (a calibration on file that prices the model
high: the test hook, no sleeps), as `plan --budget` says before the run, stops the sweep after the BM25 configs: they
are recorded, the others are over_budget in DuckDB, MLflow and the --json lines, the exit code is 0, the sweep counts
as unfinished (the report says to continue it, `promote` refuses), and the next run without a budget completes with
per-query values equal to an unbudgeted sweep's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict

import pytest
from conftest import ROOT, price_model_high, write_config
from typer.testing import CliRunner

from ragbench.cli import app
from ragbench.config import load_config
from ragbench.core.errors import ConfigError
from ragbench.core.models import count_tokens
from ragbench.embedding.embed import first_load
from ragbench.evaluation.cost import COST_MEASURES
from ragbench.results.completion import sweep_completion
from ragbench.results.store import ResultStore
from ragbench.sweep import run_sweep
from ragbench.sweep import budget, calibrate, orchestrator
from ragbench.sweep.calibrate import CALIBRATION_SAMPLE, learn_rate, load_calibration, weight_bytes
from ragbench.sweep.config_rate import config_rate_path
from ragbench.sweep.estimate import MLFLOW_BYTES, RUNTIME_BYTES, SWEEP_PROCESS_BYTES

SWEEP = f"""name: budgeted
dataset: {{name: nimbus-demo, path: {ROOT / 'datasets' / 'demo'}, split: test, queries: all}}
chunkers: [{{kind: whole}}, {{kind: fixed, size: 128, overlap: 32}}]
embedders: [{{model: static-retrieval-m2v}}]
retrievers: [{{kind: bm25}}, {{kind: dense, exact: true}}]
metrics: {{cutoffs: [1, 5, 10]}}
ann_fidelity: {{enabled: false}}
"""


def _cli(*args):
    res = CliRunner().invoke(app, [str(a) for a in args])
    return res


def _plan(cfg_path, home, *options) -> dict:
    res = _cli("plan", cfg_path, "--json", "--home", home, *options)
    assert res.exit_code == 0, res.output
    return json.loads(next(line for line in res.stdout.splitlines() if line.startswith("{")))


def _values(store: ResultStore, sweep_id: str, config_id: str):
    rows = store.query_metrics(sweep_id, config_id)
    rows = rows.filter(~rows["measure"].is_in(list(COST_MEASURES)))
    return sorted((q, m, None if v != v else v) for q, m, v in rows.select("query_id", "measure", "value").iter_rows())


def test_plan_cold_then_warm_matches_what_the_sweep_does(tmp_path, settings, monkeypatch):
    monkeypatch.setattr(calibrate, "LEARN_MIN_SECONDS", 0.0)  # the static model encodes a stage in milliseconds
    path = write_config(tmp_path / "b.yaml", SWEEP)
    cfg, home = load_config(path), settings.home
    cold = _plan(path, home)
    n = len(cfg.expand())
    assert cold["configs"] == {"run": n, "reuse": 0, "skip": 0}
    assert cold["texts_to_embed"] > 0 and cold["total_seconds"] > 0
    assert {r["stage"] for r in cold["rows"]} >= {"chunk", "embed", "index", "evaluate"}
    assert cold["calibrations"]["static-retrieval-m2v"]["measured_by"] == "sample"
    etas = []  # the sweep's progress takes its ETA from the plan's clock (BM25 runs first: the mean rate misleads)
    real_progress = orchestrator.progress
    monkeypatch.setattr(orchestrator, "progress", lambda description, total, eta=None: (
        etas.append((description, total, eta() if eta is not None else None)) or real_progress(description, total,
                                                                                               eta=eta)))
    result = run_sweep(cfg, settings)
    [(description, total, eta)] = etas
    assert (description, total) == ("sweep budgeted: configs", n)
    assert 0 < eta <= cold["total_seconds"], (eta, cold["total_seconds"])
    assert result.n_failed == 0
    assert sum(s.computed for s in result.embed_stats) == cold["texts_to_embed"]  # what the sweep then embedded
    # the stage that encoded a sample's worth of new texts (fixed 128: 216; whole: 36) replaced the stored rate
    [stage] = [s for s in result.embed_stats if s.computed >= CALIBRATION_SAMPLE]
    learned = load_calibration(home, cfg.embedders[0])
    assert learned.measured_by == "sweep" and learned.texts == stage.computed
    assert learned.seconds_per_token * learned.tokens == pytest.approx(stage.encode_seconds)
    evaluated = [o for o in result.outcomes if o.reused_from is None]
    assert len(evaluated) == cold["configs"]["run"]
    warm = _plan(path, home)
    assert warm["texts_to_embed"] == 0 and warm["configs"] == {"run": 0, "reuse": n, "skip": 0}
    assert all(r["count"] == 0 for r in warm["rows"] if r["stage"] in ("embed", "evaluate"))
    # other cutoffs: every config is evaluated again, yet every vector is in the cache (asked text by text)
    other = write_config(tmp_path / "c.yaml", SWEEP.replace("cutoffs: [1, 5, 10]", "cutoffs: [1, 3, 10]"))
    again = _plan(other, home)
    assert again["configs"]["run"] == n and again["texts_to_embed"] == 0
    # a config's evaluation is priced as the sweep before measured it in this home (same queries: its mean exactly)
    rate = json.loads(config_rate_path(home).read_text())
    assert rate["configs"] == n and rate["queries"] > 0 and rate["seconds"] > 0
    [row] = [r for r in again["rows"] if r["stage"] == "evaluate"]
    assert row["seconds"] == pytest.approx(n * rate["seconds"] / rate["configs"])
    assert not any(r["seconds"] == pytest.approx(row["seconds"]) for r in cold["rows"] if r["stage"] == "evaluate")
    assert all(r["cached"] > 0 for r in again["rows"] if r["stage"] == "embed")
    assert run_sweep(load_config(other), settings).vectors_computed == 0


def test_a_sweep_not_planned_first_keeps_what_it_measured_as_the_calibration(tmp_path, settings, monkeypatch,
                                                                            caplog):
    monkeypatch.setattr(calibrate, "LEARN_MIN_SECONDS", 0.0)
    monkeypatch.setattr(budget, "memory_limit_bytes", lambda: 2**20)  # a process allowed 1 MiB: the plan warns
    path = write_config(tmp_path / "b.yaml", SWEEP)
    cfg, home = load_config(path), settings.home
    emb = cfg.embedders[0]
    assert load_calibration(home, emb) is None
    result = run_sweep(cfg, settings)  # no plan before it: nothing on file
    [warned] = [r for r in caplog.records if r.levelname == "WARNING" and "MiB this process may use" in r.message]
    assert warned.message.startswith("plan: peak memory ~") and "is over the 1 MiB" in warned.message
    [stage] = [s for s in result.embed_stats if s.computed >= CALIBRATION_SAMPLE]
    learned = load_calibration(home, emb)
    assert learned.measured_by == "sweep" and learned.texts == stage.computed
    assert learned.seconds_per_token * learned.tokens == pytest.approx(stage.encode_seconds)
    # the load's seconds and memory: this process's first load of the model (its weights as loaded, no sample)
    load_seconds, load_bytes = first_load(emb)
    assert learned.load_seconds == load_seconds > 0
    assert learned.memory_bytes == max(load_bytes, learned.weight_bytes)
    # the next plan with texts to embed (another chunker) prices them with it: no sample taken
    other = write_config(tmp_path / "c.yaml", SWEEP.replace("chunkers: [", "chunkers: [{kind: fixed, size: 64}, "))
    planned = _plan(other, home)
    assert planned["texts_to_embed"] > 0 and planned["calibrations"][emb.label] == asdict(learned)
    sample = _plan(other, home, "--recalibrate")["calibrations"][emb.label]
    assert (learned.dim, learned.weight_bytes, learned.model_key) == (sample["dim"], sample["weight_bytes"],
                                                                     sample["model_key"])


def test_plan_recalibrate_measures_again_over_a_stored_rate(tmp_path, settings):
    path = write_config(tmp_path / "b.yaml", SWEEP)
    emb, home = load_config(path).embedders[0], settings.home
    price_model_high(home, emb)
    stored = _plan(path, home)
    assert stored["calibrations"][emb.label]["seconds_per_token"] == 10.0  # what is stored is used as it is
    # no memory measured: the model counts its weight files; the process part is the sweep's with MLflow
    weights = weight_bytes(emb)
    assert stored["memory_bytes"]["models"] == weights > 0
    assert stored["memory_bytes"]["process"] == SWEEP_PROCESS_BYTES + MLFLOW_BYTES
    assert stored["memory_bytes"]["runtimes"] == RUNTIME_BYTES["torch"] and stored["memory_bytes"]["data"] > 0
    assert stored["peak_memory_bytes"] == sum(stored["memory_bytes"].values())
    fresh = _plan(path, home, "--recalibrate")
    measured = fresh["calibrations"][emb.label]
    assert measured["measured_by"] == "sample" and 0 < measured["seconds_per_token"] < 0.01
    assert fresh["memory_bytes"]["models"] == measured["memory_bytes"] >= weights  # measured: what it holds
    assert fresh["total_seconds"] < stored["total_seconds"] / 100
    assert asdict(load_calibration(home, emb)) == measured  # and kept for the next plan
    # a sweep stage replaces it only from a sample's worth of texts and LEARN_MIN_SECONDS of model time
    short = calibrate.LEARN_MIN_SECONDS * 0.9
    assert learn_rate(home, emb, short, 1000, CALIBRATION_SAMPLE * 4) is None
    assert learn_rate(home, emb, 100.0, 1000, CALIBRATION_SAMPLE - 1) is None
    assert asdict(load_calibration(home, emb)) == measured
    learned = learn_rate(home, emb, 100.0, 1000, CALIBRATION_SAMPLE)
    assert learned == load_calibration(home, emb) and learned.seconds_per_token == 0.1
    assert (learned.measured_by, learned.dim, learned.load_seconds) == ("sweep", measured["dim"],
                                                                       measured["load_seconds"])


def test_a_calibration_measures_the_memory_a_model_adds(tmp_path):
    # in a process of its own, as `ragbench plan` calibrates: here the model may be loaded already
    code = ("import json, sys; from ragbench.embedding.spec import EmbedderSpec; "
            "from ragbench.sweep.calibrate import calibrate; "
            "cal = calibrate(sys.argv[1], EmbedderSpec(model='all-MiniLM-L6-v2'), ['a text ' * 200] * 64); "
            "print(json.dumps([cal.memory_bytes, cal.weight_bytes]))")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    memory, weights = json.loads(done.stdout.strip().splitlines()[-1])
    # MiniLM's 91 MB of weights, its tokenizer, then activations of a batch of 32 texts of 254 tokens: ~550 MB
    # measured alone, 167 MB under the whole suite (its thread settings): more than the weights, never the bare floor
    assert weights < memory < 2 * 2**30


def test_budget_stops_halfway_records_over_budget_and_the_next_run_completes(tmp_path, settings):
    path = write_config(tmp_path / "b.yaml", SWEEP)
    cfg = load_config(path)
    budgeted_home, plain_home = tmp_path / "budgeted", tmp_path / "plain"
    # the reference: the same sweep, no budget, in its own home
    reference = run_sweep(cfg, settings.with_home(plain_home))
    assert reference.n_failed == 0
    hook = price_model_high(budgeted_home, cfg.embedders[0])
    bm25 = {c.config_id for c in cfg.expand() if c.embedder is None}
    dense = {c.config_id for c in cfg.expand() if c.embedder is not None}
    assert bm25 and dense
    # the plan says before the run what the budget lets finish
    fit = _plan(path, budgeted_home, "--budget", "1h")["budget"]
    assert (fit["fits"], set(fit["finish"]), set(fit["over_budget"])) == (False, bm25, dense)
    res = _cli("sweep", path, "--orchestrator", "local", "--json", "--home", budgeted_home, "--budget", "1h",
               "--no-report")
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    status = {r["config_id"]: r["status"] for r in rows}
    assert {status[c] for c in bm25} == {"finished"} and {status[c] for c in dense} == {"over_budget"}
    assert all(r["rank"] is None and r["error"].startswith("not run: over budget") for r in rows
               if r["status"] == "over_budget")
    store = ResultStore(budgeted_home / "results.duckdb")
    first = store.sweeps()["sweep_id"].to_list()[-1]
    stored = dict(store.query("SELECT config_id, status FROM configs WHERE sweep_id = ?", [first]).iter_rows())
    assert stored == status
    import mlflow

    runs = mlflow.MlflowClient(f"sqlite:///{budgeted_home / 'mlflow.db'}").search_runs(
        [e.experiment_id for e in mlflow.MlflowClient(f"sqlite:///{budgeted_home / 'mlflow.db'}").search_experiments()],
        "tags.`ragbench.status` = 'over_budget'")
    assert len(runs) == len(dense) and {r.info.status for r in runs} == {"KILLED"}
    # stopped by its budget, the sweep is not finished: its best may be a config it never started, so the report's
    # next step is to continue it (no promotion), and `promote` refuses its best without --force
    done = sweep_completion(store, first)
    assert not done.finished and (done.configs_done, done.over_budget) == (len(bm25), len(dense))
    report = _cli("report", first, "--format", "json", "--no-mlflow", "--home", budgeted_home)
    assert report.exit_code == 0, report.output
    headline = json.loads(report.stdout.splitlines()[0])["headline"]  # a JSON line per config, each with it
    steps, best = headline["next_steps"], headline["winner_id"]
    assert steps[0].startswith("Finish the sweep first") and not any("Promote" in s for s in steps), steps
    refused = _cli("promote", first, best, "--home", budgeted_home)
    assert refused.exit_code != 0 and "over budget" in refused.output, refused.output
    # the next run, no budget: the BM25 configs are reused, the dense ones evaluated, values as the reference's
    hook.unlink()
    again = run_sweep(cfg, settings.with_home(budgeted_home))
    assert again.n_failed == 0 and {o.status for o in again.outcomes} == {"finished"}
    assert sweep_completion(store, again.sweep_id).finished
    assert {o.config_id for o in again.outcomes if o.reused_from} == bm25
    ref_store, store = ResultStore(plain_home / "results.duckdb"), ResultStore(budgeted_home / "results.duckdb")
    for c in bm25 | dense:
        assert _values(store, again.sweep_id, c) == _values(ref_store, reference.sweep_id, c), c


def test_a_budget_counts_from_the_commands_start_and_keeps_the_wrap_up_this_home_measured(tmp_path, settings):
    """Started an hour ago with an hour's budget, nothing starts (BM25 included); the sweep's close and its
    report are timed into the home (the plan says so), and a report measured as dear keeps a budget from every
    stage when the caller publishes after the sweep, and from none when it does not."""
    from ragbench.sweep import publish_sweep
    from ragbench.sweep.wrap_up import CLOSE, PUBLISH, wrap_up_path

    path = write_config(tmp_path / "b.yaml", SWEEP)
    cfg = load_config(path)
    home, n = tmp_path / "home", len(cfg.expand())
    late = run_sweep(cfg, settings.with_home(home), budget=3600.0, budget_from=time.time() - 3600)
    assert {o.status for o in late.outcomes} == {"over_budget"}
    assert not list((home / "calibration").glob("*static*"))  # with no time left, no model is calibrated
    assert not wrap_up_path(home).exists()  # a close with no config with results prices none: nothing kept
    done = run_sweep(cfg, settings.with_home(home))  # no budget: it finishes
    assert {o.status for o in done.outcomes} == {"finished"}
    assert json.loads(wrap_up_path(home).read_text())[CLOSE]["configs"] == n
    assert publish_sweep(done.sweep_id, settings.with_home(home), mlflow=False).html is not None
    measured = json.loads(wrap_up_path(home).read_text())
    assert measured[PUBLISH]["configs"] == n and measured[PUBLISH]["seconds"] > 0
    # the plan says what will follow the last stage, as measured (apart from its total)
    assert _plan(path, home)["wrap_up_seconds"] == pytest.approx(measured[CLOSE]["seconds"]
                                                                + measured[PUBLISH]["seconds"])
    wrap_up_path(home).write_text(json.dumps({**measured, PUBLISH: {"configs": 1, "seconds": 3600.0}}))  # an hour
    kept = run_sweep(cfg, settings.with_home(home), budget=3600.0, fresh=True, publish_after=True)
    assert {o.status for o in kept.outcomes} == {"over_budget"}
    free = run_sweep(cfg, settings.with_home(home), budget=3600.0, fresh=True, publish_after=False)
    assert {o.status for o in free.outcomes} == {"finished"}


def test_encoded_tokens_are_what_the_encoder_computes_on():
    """A transformer pays for each batch (longest first by characters, as the embed stage sorts) padded to its
    longest text in tokens, cut at its window, [CLS] and [SEP] counted, in the batches of the device it runs on; a
    static model pays for its tokens."""
    from ragbench.embedding.spec import EmbedderSpec
    from ragbench.sweep.calibrate import encoded_tokens

    texts = ["short text", "word " * 300, "word " * 10, "word " * 40]   # 2, 300, 10 and 40 tokens
    minilm = EmbedderSpec(model="all-MiniLM-L6-v2", batch_size=2)
    # batches by characters: (300, 40) and (10, 2); 300 tokens cut at the 254 the model reads
    assert encoded_tokens(texts, minilm) == 2 * (254 + 2) + 2 * (10 + 2)
    assert encoded_tokens(texts, EmbedderSpec(model="all-MiniLM-L6-v2", batch_size=1)) == 254 + 40 + 10 + 2 + 4 * 2
    # on CUDA the embed stage sends four times the batch: all four texts in one batch padded to the longest
    assert encoded_tokens(texts, minilm, device="cuda") == 4 * (254 + 2)
    assert encoded_tokens(texts, EmbedderSpec(model="static-retrieval-m2v", batch_size=2)) == sum(
        count_tokens(texts, "static-retrieval-m2v"))


def test_the_calibration_sample_is_encoded_with_its_document_prompt_once(tmp_path, settings, monkeypatch):
    """The plan's new texts carry the model's document prompt (as they are hashed and counted); the sample it
    calibrates on goes through the encoder, which adds the prompt: once, not twice."""
    from ragbench.embedding import embed

    encoded: list[str] = []
    real = embed.encode_uncached

    def spy(texts, spec, role):
        encoded.extend((spec.document_prompt if role == "document" else spec.query_prompt) + t for t in texts)
        return real(texts, spec, role)

    monkeypatch.setattr(embed, "encode_uncached", spy)
    prompted = "{model: static-retrieval-m2v, document_prompt: 'passage: '}"
    path = write_config(tmp_path / "p.yaml", SWEEP.replace("{model: static-retrieval-m2v}", prompted))
    planned = _plan(path, settings.home)
    sample = planned["calibrations"]["static-retrieval-m2v"]
    assert sample["measured_by"] == "sample" and encoded
    assert all(t.startswith("passage: ") and not t.startswith("passage: passage: ") for t in encoded)


def test_the_prefect_flows_budget_parameter_is_checked_before_anything_runs_and_the_flow_leaves_no_handler(
        tmp_path):
    """A deployment's ``budget`` parameter is read as ``--budget`` is: a bad one is a one-line error, nothing
    stored (it was copied into the config unchecked, to fail later inside the flow)."""
    import logging

    from prefect.logging.handlers import APILogHandler

    from flows.sweep import sweep_flow

    with pytest.raises(ConfigError, match="^budget '8 hours' is not a duration; write e.g. 8h"):
        sweep_flow.fn(str(ROOT / "configs" / "demo.yaml"), home=str(tmp_path / "home"), budget="8 hours")
    assert not (tmp_path / "home" / "results.duckdb").exists()
    # the flow's log handler left with it (it stayed on the ragbench logger, warning on every later log line)
    assert not any(isinstance(h, APILogHandler) for h in logging.getLogger("ragbench").handlers)


def test_a_screen_the_budget_cannot_afford_is_skipped_and_its_pool_priced_into_each_pairs_embedding(
        tmp_path, ragbench_log):
    """A screened sweep under a budget: a screen whose pooled embeddings would pass the budget does not run (it
    spent a 40 s demo budget on the pool, then refused every config, BM25 included); the grid is then ordered by
    the budget alone, each pair's embedding priced with the pooled texts the plan had left to the screen."""
    # a transformer: the static model's vectors are cut with the pool (it is one of the screen's cheap retrievers)
    path = write_config(tmp_path / "s.yaml", SWEEP.replace("name: budgeted", "name: screened-budget")
                        .replace("static-retrieval-m2v", "all-MiniLM-L6-v2") + "search: {strategy: screen}\n")
    cfg, home = load_config(path), tmp_path / "home"
    price_model_high(home, cfg.embedders[0])
    res = _cli("sweep", path, "--orchestrator", "local", "--json", "--home", home, "--budget", "1h", "--no-report")
    assert res.exit_code == 0, res.output
    assert any(m.startswith("screen: skipped: its pooled embeddings") for m in ragbench_log), ragbench_log
    status = {r["config_id"]: r["status"] for r in (json.loads(line) for line in res.stdout.splitlines()
                                                     if line.startswith("{"))}
    # the demo's 34 queries pool every one of its 36 documents: left to the screen, the full embeddings read as free
    assert {status[c.config_id] for c in cfg.expand() if c.embedder is None} == {"finished"}
    assert {status[c.config_id] for c in cfg.expand() if c.embedder is not None} == {"over_budget"}
    store = ResultStore(home / "results.duckdb")
    assert store.query("SELECT count(*) AS n FROM screening")["n"][0] == 0


@pytest.mark.parametrize("slowed", [2, 3])  # the first timing or the second (call 1 is the untimed warm-up)
def test_the_calibration_keeps_the_faster_of_its_timings(tmp_path, monkeypatch, slowed):
    """Whatever else the machine does while the sample is timed only adds time: a timing slowed by a second here is
    not the rate kept, whichever it is."""
    from ragbench.embedding import embed
    from ragbench.sweep.calibrate import calibrate

    real, calls = embed.encode_uncached, []

    def slowed_once(texts, spec, role):
        calls.append(len(texts))
        if len(calls) == slowed:
            time.sleep(1.0)
        return real(texts, spec, role)

    monkeypatch.setattr(embed, "encode_uncached", slowed_once)
    spec = load_config(write_config(tmp_path / "c.yaml", SWEEP)).embedders[0]
    cal = calibrate(tmp_path / "home", spec, [f"passage {i} about the sweep's calibration" for i in range(100)])
    assert calls == [2, 64, 64]
    assert cal.seconds_per_token * cal.tokens < 0.5  # the static model encodes 64 texts in milliseconds
