"""A regression gate for CI: a candidate config against the production config, on a small probe set.

``ragbench gate CONFIG --against production`` retrieves with both configs, through the library's retrieval
pipeline (:func:`ragbench.retrieval.retrieve`, the path the sweep judges and serving answers with; chunks, vectors
and collections come from the home's caches and are built when missing), on the same probes, and says whether the
candidate regressed.

**Probes.** Two kinds, both judged on documents:

* *labelled probes*: queries with document (or quote) labels. Default: a seeded sample of ``n`` labelled queries of
  the production sweep's dataset; ``--probes FILE`` reads a questions file instead (CSV, JSONL or YAML with the
  columns of a folder dataset's questions: ``question``, ``doc``, ``quote``, ...; quotes are located in the
  production dataset's documents exactly as ``datasets validate`` does);
* *oracle probes*: for each labelled probe with an evidence span, one probe whose text **is** that evidence (the
  first span of relevance > 0, cut to :data:`ORACLE_CHARS` characters at a word boundary) and whose only relevant
  document is the span's. Any sane retriever finds a document from a verbatim passage of it; a config that cannot
  is broken (a wrong index, an empty collection, a tokenizer mismatch), whatever its mean says. Ids:
  ``oracle:<query id>``.

A probe **passes** when a relevant document is in the top ``k`` documents (hit@k; documents ranked as the sweep
judges them, :func:`ragbench.evaluation.judging.document_run`).

**Verdict** (``regressed`` = exit code 1):

* the candidate is significantly worse on the primary measure (production's, per probe, labelled and oracle
  probes together): mean difference < 0 and two-sided paired randomization p-value
  (:func:`ragbench.evaluation.paired_tests.paired_randomization_test`) < ``alpha``; or
* a probe that production passes fails under the candidate.

The regressed probes are those that lost hit@k, and, when the mean is significantly worse, also those whose
primary value dropped.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl

from ragbench.config import RunConfig
from ragbench.core.cache import ChunkCache, VectorCache
from ragbench.core.errors import RagbenchError
from ragbench.core.measure_keys import measure_key
from ragbench.core.schemas import QRELS_SCHEMA, QUERY_SCHEMA, index_texts
from ragbench.core.settings import Settings
from ragbench.data.dataset import Dataset
from ragbench.evaluation.judging import document_run
from ragbench.evaluation.means import query_mean
from ragbench.evaluation.measures import RANK_MEASURES
from ragbench.evaluation.measures.base import Measure
from ragbench.evaluation.metrics import evaluate_per_query
from ragbench.evaluation.paired_tests import paired_randomization_test
from ragbench.retrieval import RetrievalResources, retrieve

#: an oracle probe's text: the evidence span, cut to this many characters (a passage, not a page)
ORACLE_CHARS = 300
ORACLE_PREFIX = "oracle:"


class GateInputError(RagbenchError):
    """The gate cannot run: nothing in production, a candidate on other data, a bad probes file (exit code 2)."""


@dataclass(frozen=True)
class GateResult:
    """What the gate compared and found. ``per_probe``: ``query_id, text, kind, production, candidate,
    production_hit, candidate_hit, regressed`` (primary values and hit@k per probe). ``notes``: what the reader
    must know besides the verdict (production promoted from an unfinished sweep), one line each."""

    production: str
    candidate: str
    candidate_id: str
    primary: str
    k: int
    per_probe: pl.DataFrame
    mean_production: float
    mean_candidate: float
    mean_diff: float
    p_value: float
    n_paired: int
    significantly_worse: bool
    alpha: float
    notes: tuple[str, ...] = ()

    @property
    def lost_probes(self) -> pl.DataFrame:
        """Probes production passes (hit@k) and the candidate fails."""
        return self.per_probe.filter(pl.col("production_hit") & ~pl.col("candidate_hit"))

    @property
    def regressed(self) -> bool:
        return self.significantly_worse or self.lost_probes.height > 0

    @property
    def regressed_probes(self) -> pl.DataFrame:
        return self.per_probe.filter(pl.col("regressed"))


def parse_rank_measure(measure: str, gain: str = "exponential") -> Measure:
    """``ndcg_at_10`` (or ``ndcg@10``) as a :class:`Measure` with nDCG ``gain``; only document rank measures can
    gate on probes."""
    key = measure_key(measure)
    name, _, k = key.rpartition("_at_")
    if name not in RANK_MEASURES or not k.isdigit():
        raise GateInputError(f"the gate judges probes on documents: {measure!r} is not a document rank measure "
                             f"({', '.join(sorted(RANK_MEASURES))} at a cutoff, e.g. ndcg_at_10); pass --primary")
    return Measure(name, int(k), gain)


def sample_probes(ds: Dataset, n: int, seed: int = 0) -> Dataset:
    """``ds`` cut to a seeded sample of ``n`` labelled queries (all of them when there are fewer), in id order."""
    labelled = sorted(ds.qrels.filter(pl.col("relevance") > 0)["query_id"].unique().to_list())
    if not labelled:
        raise GateInputError(f"dataset {ds.name} has no labelled query to probe with")
    keep = sorted(random.Random(seed).sample(labelled, n)) if n < len(labelled) else labelled
    return _only(ds, keep)


def probes_from_file(ds: Dataset, path: Path) -> Dataset:
    """Labelled probes from a questions file (CSV, JSONL, YAML), labelled against ``ds``' documents; every problem
    of the file is raised at once, each with its line."""
    from ragbench.core.errors import DatasetError
    from ragbench.data.labels import label_questions
    from ragbench.data.questions import read_questions

    try:
        questions, problems = read_questions(path)
        labels = label_questions(path, questions, dict(zip(ds.corpus["doc_id"], ds.corpus["text"])),
                                 problems=problems)
    except DatasetError as e:
        raise GateInputError(str(e)) from None
    probes = replace(ds, queries=labels.queries, qrels=labels.qrels, spans=labels.spans)
    if probes.n_unlabelled == probes.queries.height:
        raise GateInputError(f"{path}: no labelled question (a probe needs a doc or a quote)")
    return probes


def with_oracle_probes(ds: Dataset) -> Dataset:
    """``ds`` plus one oracle probe per labelled query with an evidence span (see the module docstring)."""
    texts = dict(zip(ds.corpus["doc_id"], ds.corpus["text"]))
    first = (ds.spans.filter(pl.col("relevance") > 0).sort("query_id", "doc_id", "start")
             .unique("query_id", keep="first", maintain_order=True))
    rows, qrels = [], []
    for qid, doc_id, start, end in first.select("query_id", "doc_id", "start", "end").iter_rows():
        passage = " ".join(texts[doc_id][start:end].split())
        if len(passage) > ORACLE_CHARS:
            passage = passage[:ORACLE_CHARS].rsplit(" ", 1)[0]
        if passage:
            rows.append({"query_id": ORACLE_PREFIX + qid, "text": passage, "query_class": "oracle", "answers": []})
            qrels.append({"query_id": ORACLE_PREFIX + qid, "doc_id": doc_id, "relevance": 1})
    if not rows:
        return ds
    queries = pl.concat([ds.queries, pl.DataFrame(rows, schema=QUERY_SCHEMA)], how="diagonal_relaxed")
    return replace(ds, queries=queries.select(ds.queries.columns),
                   qrels=pl.concat([ds.qrels, pl.DataFrame(qrels, schema=QRELS_SCHEMA)], how="diagonal_relaxed")
                   .select(ds.qrels.columns))


def _only(ds: Dataset, query_ids: list[str]) -> Dataset:
    ids = pl.Series(query_ids, dtype=pl.String).implode()
    return replace(ds, queries=ds.queries.filter(pl.col("query_id").is_in(ids)),
                   qrels=ds.qrels.filter(pl.col("query_id").is_in(ids)),
                   spans=ds.spans.filter(pl.col("query_id").is_in(ids)))


def probe_values(run_config: RunConfig, probes: Dataset, settings: Settings, index, measures: list[Measure]
                 ) -> pl.DataFrame:
    """Per-probe values of ``measures`` (long: ``query_id, measure, value``) for ``run_config`` retrieving over
    ``probes``' corpus. Chunks, document vectors and the collection come from the home's caches (built there
    when missing, as a sweep would); only the probe queries are embedded."""
    from ragbench.chunking import chunk_corpus
    from ragbench.embedding.embed import embed_texts
    from ragbench.index.build import IndexInputs, index_stage

    home = Path(settings.home)
    cache = VectorCache(home / "cache")
    chunks, _ = ChunkCache(home / "cache").get_or_build(
        ChunkCache.key(probes.fingerprint, run_config.chunker),
        lambda: chunk_corpus(probes, run_config.chunker))
    res = RetrievalResources(chunks, vector_cache=cache)
    sessions = []
    emb = run_config.embedder
    if emb is not None:
        embed_texts(index_texts(chunks), emb, "document", cache, return_vectors=False,
                    reserve_bytes=settings.min_free_bytes)
        build = dict(disk_root=home, reserve_bytes=settings.min_free_bytes)
        res.index = index
        inputs = IndexInputs(probes.fingerprint, probes.corpus, run_config.chunker, chunks, emb, run_config.index)
        res.collection = index_stage(inputs, cache, index, **build)
        sessions.append(res.collection)
        if run_config.retriever.uses_sparse_collection:
            res.hybrid_collection = index_stage(replace(inputs, sparse=True), cache, index, **build)
            sessions.append(res.hybrid_collection)
        res.query_vectors, _ = embed_texts(probes.queries["text"].to_list(), emb, "query", cache)
    from contextlib import ExitStack

    with ExitStack() as held:
        for name in sessions:
            held.enter_context(index.session(name))
        out = retrieve(run_config, probes, res)
    return evaluate_per_query(document_run(out.run), probes.qrels, probes.queries["query_id"].to_list(), measures)


@dataclass(frozen=True)
class RegressionRules:
    """How the regression gate judges: the ``primary`` document measure of its paired test (at level ``alpha``,
    seeded by ``seed``), the ``k`` of the hit@k a probe must keep, and the nDCG ``gain`` of production's sweep."""

    primary: str
    k: int = 10
    alpha: float = 0.05
    seed: int = 0
    gain: str = "exponential"


def run_regression_gate(production: RunConfig, candidate: RunConfig, probes: Dataset, settings: Settings, index,
                        rules: RegressionRules, *, production_name: str | None = None) -> GateResult:
    """Retrieve the ``probes`` with both configs and decide by ``rules`` (the verdict in the module docstring);
    ``production_name`` names production in the result (default: its config's name)."""
    primary, k, alpha, seed = rules.primary, rules.k, rules.alpha, rules.seed
    if k <= 0:
        raise GateInputError(f"k must be positive, got {k}")
    if not 0 < alpha < 1:
        raise GateInputError(f"alpha must be in (0, 1), got {alpha}")
    main, hit = parse_rank_measure(primary, rules.gain), Measure("hit", k, rules.gain)
    measures = [main] if str(main) == str(hit) else [main, hit]
    values = {}
    for role, cfg in (("production", production), ("candidate", candidate)):
        long = probe_values(cfg, probes, settings, index, measures)
        values[role] = long.pivot(on="measure", index="query_id", values="value")
    m, h = str(main), str(hit)
    table = (probes.queries.select("query_id", "text", "query_class")
             .join(values["production"].select("query_id", pl.col(m).alias("production"),
                                               pl.col(h).alias("production_hit")), on="query_id", how="left")
             .join(values["candidate"].select("query_id", pl.col(m).alias("candidate"),
                                              pl.col(h).alias("candidate_hit")), on="query_id", how="left")
             .filter(pl.col("production").is_not_nan() & pl.col("candidate").is_not_nan())  # unlabelled: no probe
             .with_columns(pl.col("production_hit") > 0, pl.col("candidate_hit") > 0,
                           kind=pl.when(pl.col("query_id").str.starts_with(ORACLE_PREFIX)).then(pl.lit("oracle"))
                           .otherwise(pl.lit("labelled")))
             .drop("query_class")
             .sort("query_id"))
    a, b = table["candidate"].to_numpy(), table["production"].to_numpy()
    test = paired_randomization_test(a, b, seed=seed)
    worse = test.n > 0 and test.mean_diff < 0 and test.p_value < alpha
    lost = pl.col("production_hit") & ~pl.col("candidate_hit")
    table = table.with_columns(regressed=lost | (pl.lit(worse) & (pl.col("candidate") < pl.col("production"))))
    return GateResult(production_name or production.labels.text, candidate.labels.text, candidate.config_id,
                      measure_key(primary), k, table,
                      query_mean(b), query_mean(a),
                      float(test.mean_diff), float(test.p_value), int(test.n), bool(worse), alpha)


def select_candidate(configs: list[RunConfig], choice: str | None, source: str) -> RunConfig:
    """The one config of a sweep file that is the candidate: the only one, or the one ``choice`` names (its
    config id, a unique id prefix, its exact name or label, or its 1-based position in the grid)."""
    if choice is None:
        if len(configs) == 1:
            return configs[0]
        raise GateInputError(f"{source} expands to {len(configs)} configs; pick the candidate with --config "
                             "(position, id or name): " + "; ".join(f"{i}: {c.labels.text}" for i, c in
                                                                     enumerate(configs, 1)))
    if choice.isdigit() and 1 <= int(choice) <= len(configs):
        return configs[int(choice) - 1]
    exact = [c for c in configs if choice in (c.config_id, c.name, c.labels.text, c.retriever.label)]
    found = exact or [c for c in configs if c.config_id.startswith(choice)]
    if len(found) == 1:
        return found[0]
    what = "matches no config" if not found else f"is ambiguous ({len(found)} configs)"
    raise GateInputError(f"--config {choice!r} {what} of {source}: " + "; ".join(
        f"{i}: {c.labels.text}" for i, c in enumerate(configs, 1)))


def probe_set(ds: Dataset, *, probes_file: Path | None = None, n: int = 30, seed: int = 0,
              oracle: bool = True) -> Dataset:
    """The probes: ``probes_file`` labelled on ``ds``' documents, else a seeded sample of ``n`` labelled queries
    of ``ds``; plus their oracle probes unless ``oracle`` is False."""
    base = probes_from_file(ds, probes_file) if probes_file is not None else sample_probes(ds, n, seed)
    return with_oracle_probes(base) if oracle else base


def regression_lines(result: GateResult) -> list[str]:
    """The verdict in words, one line each (for the CLI and CI logs)."""
    r = result
    n_probes = r.per_probe.height
    n_oracle = int((r.per_probe["kind"] == "oracle").sum())
    lines = [f"gate: candidate {r.candidate} ({r.candidate_id[:12]}) vs production {r.production} on {n_probes} probes "
             f"({n_probes - n_oracle} labelled, {n_oracle} oracle), k = {r.k}",
             f"{r.primary}: production {r.mean_production:.4f}, candidate {r.mean_candidate:.4f}, mean difference "
             f"{r.mean_diff:+.4f} over {r.n_paired} paired probes; paired randomization p = "
             f"{r.p_value:.4g}" + (f" < {r.alpha:g}: significantly worse" if r.significantly_worse else
                                   f" (not significantly worse at {r.alpha:g})" if r.mean_diff < 0 else ""),
             f"hit@{r.k}: production passes {int(r.per_probe['production_hit'].sum())}, candidate passes "
             f"{int(r.per_probe['candidate_hit'].sum())}; {r.lost_probes.height} probe(s) passed by production now "
             f"fail"]
    return [*lines, *r.notes]
