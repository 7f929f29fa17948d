"""Explain one query of one config: what it retrieved, what was relevant, and what beat the first relevant chunk.

The store keeps only ids and scores (table ``rankings``). The texts come from the data the sweep used: the dataset
is reloaded from the sweep's stored spec (``sweeps.spec_json["dataset"]``, refused if its fingerprint changed) and
the chunks come from the chunk cache (rebuilt identically on a cache miss: chunking is deterministic).

Conventions
-----------
* A chunk is *relevant* (★) when its document is judged relevant (qrels label > 0): the sweep's metrics are
  document-level, so this is the relevance they count. When the query has span labels, ``span_overlap`` is the
  number of the chunk's characters inside a gold span (0 = the chunk's document is relevant but this chunk misses
  the evidence).
* The *deep pool* is the stored ranking cut at ``deep``; when it holds no relevant chunk and ``deep`` exceeds the
  stored depth, the query is searched again ``deep`` deep with the same config (:mod:`ragbench.promotion.serving`).
* *Near misses* are the non-relevant chunks ranked above the first relevant one: what beat it. A chunk that is not
  relevant but holds one of the row's answer strings (:func:`ragbench.data.answer_strings.answers_found`: its
  ``answer`` texts and located quotes) is marked ◆: a likely label hole, a document to judge
  (``ragbench judge pool``).
* The query is named by its id or by a part of its text (:func:`resolve_query`: a unique case-insensitive
  substring; several matches are listed, none gets the closest ids and texts).
"""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass, field

import polars as pl
from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ragbench.config.labels import config_label
from ragbench.core.errors import RagbenchError
from ragbench.core.settings import Settings
from ragbench.data.answer_strings import answer_strings, answers_found
from ragbench.results.lookup import resolve_config_id, resolve_sweep_id
from ragbench.results.store import ResultStore


@dataclass(frozen=True)
class RankedChunk:
    """One retrieved chunk. ``relevance``: qrels label of its document (0 when unjudged); ``span_overlap``: its
    characters inside the query's gold spans (None when the query has no span labels)."""

    rank: int
    chunk_id: str
    doc_id: str
    score: float
    text: str
    title: str
    relevance: int
    span_overlap: int | None
    answers: tuple[str, ...] = ()  # the row's answer strings found in the chunk's text

    @property
    def relevant(self) -> bool:
        return self.relevance > 0

    @property
    def likely_hole(self) -> bool:
        """Not relevant by the labels, yet it holds an answer string of the row: a likely label hole."""
        return not self.relevant and bool(self.answers)


@dataclass(frozen=True)
class Explanation:
    """What one config did on one query (see the module docstring for the conventions)."""

    sweep_id: str
    config_id: str
    config_name: str
    query_id: str
    query_text: str
    query_class: str | None
    answers: tuple[str, ...]
    relevant_docs: tuple[tuple[str, int], ...]  # (doc_id, label) of judged-relevant documents
    ranked: tuple[RankedChunk, ...]  # the deep pool, best first
    deep: int
    searched_deeper: bool  # the stored ranking was too shallow and the query was searched again
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def labelled(self) -> bool:
        return bool(self.relevant_docs)

    @property
    def first_relevant(self) -> RankedChunk | None:
        return next((c for c in self.ranked if c.relevant), None)

    @property
    def first_relevant_rank(self) -> int | None:
        c = self.first_relevant
        return c.rank if c else None

    @property
    def near_misses(self) -> tuple[RankedChunk, ...]:
        """Non-relevant chunks ranked above the first relevant one (all of the pool if none is relevant)."""
        r = self.first_relevant_rank
        return tuple(c for c in self.ranked if not c.relevant and (r is None or c.rank < r))

    @property
    def likely_holes(self) -> tuple[RankedChunk, ...]:
        """Near misses that hold an answer string of the row (:attr:`RankedChunk.likely_hole`)."""
        return tuple(c for c in self.near_misses if c.likely_hole)

    @property
    def missing_relevant_docs(self) -> tuple[str, ...]:
        """Relevant documents with no chunk in the deep pool."""
        seen = {c.doc_id for c in self.ranked}
        return tuple(d for d, _ in self.relevant_docs if d not in seen)


def explain(store: ResultStore, sweep_id: str, config_id_or_name: str, query_id: str, deep: int = 100, *,
            settings: Settings | None = None) -> Explanation:
    """Explain ``query_id`` (an id, or a unique part of the question's text: :func:`resolve_query`) under one
    config of a sweep (``sweep_id`` may be ``latest``; config by id, id prefix or name). ``settings.home``
    (default: the store's folder) holds the chunk cache and the collections."""
    from ragbench.promotion.serving import ProductionRetriever, load_chunks, load_dataset_checked, parse_config

    if deep <= 0:
        raise RagbenchError(f"deep must be positive, got {deep}")
    sweep_id = resolve_sweep_id(store, sweep_id)
    config_id = resolve_config_id(store, sweep_id, config_id_or_name)
    settings = settings or Settings(home=store.path.parent)
    home = settings.home
    sweep = store.sweep(sweep_id)
    cfg = store.config(sweep_id, config_id)  # exists: resolve_config_id found it
    if cfg["status"] != "finished":
        raise RagbenchError(f"config {config_label(json.loads(cfg['spec_json'] or '{}'), cfg['name'])} did not "
                            f"finish in sweep {sweep_id}: {cfg['error']}")
    spec = json.loads(cfg["spec_json"])
    dataset_spec = json.loads(sweep["spec_json"])["dataset"]
    ds = load_dataset_checked(dataset_spec, sweep["dataset_fingerprint"], home=home)

    query_id = resolve_query(dict(ds.queries.select("query_id", "text").iter_rows()), query_id,
                             f"dataset {ds.name} of sweep {sweep_id}")
    query = ds.queries.filter(pl.col("query_id") == query_id).row(0, named=True)
    qrels = ds.qrels.filter((pl.col("query_id") == query_id) & (pl.col("relevance") > 0))
    labels = dict(qrels.select("doc_id", "relevance").iter_rows())

    parsed = parse_config(spec)
    chunks = load_chunks(parsed.chunker, sweep["dataset_fingerprint"], home, dataset_spec)
    run = store.rankings(sweep_id, config_id, query_id).select("rank", "chunk_id", "doc_id", "score")
    stored_depth = int(parsed.retriever.depth)
    searched_deeper = False
    if not any(d in labels for d in run["doc_id"].head(deep).to_list()) and labels and deep > stored_depth:
        retriever = ProductionRetriever.from_config(spec, sweep["dataset_fingerprint"], settings, dataset_spec)
        try:
            run = retriever.search([query["text"]], deep).select("rank", "chunk_id", "doc_id", "score")
        finally:
            retriever.close()
        searched_deeper = True
    run = run.head(deep)

    overlaps = _span_overlaps(ds.spans.filter(pl.col("query_id") == query_id), chunks, run["chunk_id"].to_list())
    texts = dict(chunks.select("chunk_id", "text").iter_rows())
    titles = dict(ds.corpus.select("doc_id", "title").iter_rows())
    answers = answer_strings(ds, query_id)
    ranked = tuple(RankedChunk(int(r), c, d, float(s), texts.get(c, ""), titles.get(d, ""), int(labels.get(d, 0)),
                               overlaps.get(c, 0) if overlaps is not None else None,
                               tuple(answers_found(texts.get(c, ""), answers)))
                   for r, c, d, s in run.select("rank", "chunk_id", "doc_id", "score").iter_rows())
    metrics = dict(store.query_metrics(sweep_id, config_id, query_id).select("measure", "value").iter_rows())
    return Explanation(sweep_id, config_id, config_label(spec, cfg["name"]), query_id, query["text"],
                       query["query_class"],
                       tuple(query["answers"] or ()), tuple(sorted(labels.items())), ranked, deep, searched_deeper,
                       metrics)


def resolve_query(texts: dict[str, str], arg: str, where: str) -> str:
    """The query id ``arg`` names in ``texts`` (``query_id -> question``): the id itself, else the one question
    holding ``arg`` as a case-insensitive substring (whitespace runs compared as one space). Several matches are an
    error listing them; none an error naming the closest ids and questions (:mod:`difflib`)."""
    if arg in texts:
        return arg
    needle = " ".join(arg.lower().split())
    hits = [q for q, t in texts.items() if needle and needle in " ".join(t.lower().split())]
    if len(hits) == 1:
        return hits[0]
    if hits:
        shown = "; ".join(f"{q} {_snippet(texts[q], 60)!r}" for q in hits[:5])
        raise RagbenchError(f"{arg!r} is in {len(hits)} questions of {where}: {shown}"
                            f"{'; ...' if len(hits) > 5 else ''}; give more of the text, or the query id")
    close = difflib.get_close_matches(arg, list(texts), n=3, cutoff=0.6)
    close += [q for q in _closest_texts(needle, texts) if q not in close]
    hint = "; did you mean " + "; ".join(f"{q} {_snippet(texts[q], 60)!r}" for q in close[:3]) + "?" if close else \
        f" (e.g. {', '.join(list(texts)[:5])})"
    raise RagbenchError(f"no query of {where} has the id {arg!r} or a question containing it ({len(texts)} "
                        f"queries){hint}")


def _closest_texts(needle: str, texts: dict[str, str], n: int = 3) -> list[str]:
    """The ids of the ``n`` questions most like ``needle``: the best :class:`difflib.SequenceMatcher` ratio of
    ``needle`` against the whole question or any run of as many words (a typo in one word still finds it), 0.6
    at least."""
    size = max(1, len(needle.split()))
    scored = []
    for q, t in texts.items():
        words = t.lower().split()
        spans = [" ".join(words[i:i + size]) for i in range(max(1, len(words) - size + 1))] + [t.lower()]
        scored.append((max(difflib.SequenceMatcher(None, needle, w).ratio() for w in spans), q))
    return [q for score, q in sorted(scored, key=lambda x: (-x[0], x[1]))[:n] if score >= 0.6]


def _span_overlaps(spans: pl.DataFrame, chunks: pl.DataFrame, chunk_ids: list[str]) -> dict[str, int] | None:
    """Characters of each chunk inside the query's gold spans (relevance > 0); None when the query has none."""
    spans = spans.filter(pl.col("relevance") > 0)
    if spans.is_empty():
        return None
    from ragbench.evaluation.spans import chunk_relevance

    sub = chunks.filter(pl.col("chunk_id").is_in(chunk_ids))
    rel = chunk_relevance(sub, spans)
    return dict(rel.select("chunk_id", "overlap_chars").iter_rows())


# ---------------------------------------------------------------- rendering
def _snippet(text: str, n: int = 220) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


def _chunk_table(title: str, rows: tuple[RankedChunk, ...], spans: bool, width: int = 160) -> Table:
    t = Table(title=title, title_justify="left", show_lines=False, expand=True)
    t.add_column("rank", justify="right", no_wrap=True)
    t.add_column("", no_wrap=True)
    t.add_column("score", justify="right", no_wrap=True)
    t.add_column("doc / chunk", no_wrap=True, max_width=28)
    if spans:
        t.add_column("span chars", justify="right", no_wrap=True)
    t.add_column("text", ratio=1)
    for c in rows:
        star = "[bold yellow]★[/bold yellow]" if c.relevant else "[bold magenta]◆[/bold magenta]" if c.answers \
            else ""
        cells = [str(c.rank), star, f"{c.score:.4f}", f"{c.doc_id}\n[dim]{c.chunk_id}[/dim]"]
        if spans:
            cells.append("–" if c.span_overlap is None else str(c.span_overlap))
        cells.append(Text(_snippet(c.text, snippet_chars(width, spans))))
        t.add_row(*cells, style="green" if c.relevant else None)
    return t


def snippet_chars(width: int, spans: bool) -> int:
    """Characters of a chunk's text shown in a table ``width`` columns wide: what fits the text column in two
    lines (rank, mark, score, doc/chunk and the borders take 55 columns, span chars 13 more; a few characters
    left for word wrapping), 220 at most."""
    return max(40, min(220, 2 * (width - (68 if spans else 55)) - 12))


def render_explanation(e: Explanation, show: int = 10, width: int = 160) -> Group:
    """A rich renderable: the query, the top ``show`` chunks (★ = relevant), where the first relevant chunk sits in
    the deep pool, and the near misses that beat it; each chunk's text cut to two lines of a ``width``-column
    table (:func:`snippet_chars`)."""
    head = Text()
    head.append(f"{e.query_id}: ", style="bold")
    head.append(e.query_text)
    head.append(f"\nclass: {e.query_class or '–'}")
    if e.answers:
        head.append(f" · answers: {' | '.join(e.answers)}")
    head.append("\nrelevant documents: " + (", ".join(f"{d} ({r})" for d, r in e.relevant_docs) or
                                            "none (unlabelled query: not scored)"))
    shown = {k: v for k, v in e.metrics.items() if k.endswith("_at_10")} or dict(list(e.metrics.items())[:6])
    if shown:
        head.append("\n" + " · ".join(f"{k} {('–' if math.isnan(v) else f'{v:.3f}')}" for k, v in shown.items()))
    parts: list = [Panel(head, title=f"{e.config_name}  ·  sweep {e.sweep_id}", title_align="left")]

    has_spans = any(c.span_overlap is not None for c in e.ranked)
    parts.append(_chunk_table(f"top {min(show, len(e.ranked))} of {len(e.ranked)} retrieved chunks "
                              f"(★ relevant document)", e.ranked[:show], has_spans, width))
    r = e.first_relevant_rank
    pool = f"the deep pool of {len(e.ranked)}" + (" (searched again deeper than the stored ranking)"
                                                  if e.searched_deeper else "")
    if not e.labelled:
        parts.append(Text("This query has no relevance labels; nothing to explain beyond the ranking.",
                          style="yellow"))
    elif r is None:
        parts.append(Text(f"No relevant chunk in {pool}: every retrieved chunk is a near miss. Missing documents: "
                          f"{', '.join(e.missing_relevant_docs)}", style="bold red"))
    elif r == 1:
        parts.append(Text(f"The first chunk is relevant (rank 1 of {pool}).", style="bold green"))
    else:
        first = e.first_relevant
        parts.append(Text(f"First relevant chunk at rank {r} of {pool}: {first.chunk_id} (score {first.score:.4f}); "
                          f"{len(e.near_misses)} chunk(s) beat it.", style="bold"))
        if r > show:
            parts.append(_chunk_table("the first relevant chunk", (first,), has_spans, width))
        near = e.near_misses[:show]
        parts.append(_chunk_table(f"near misses: what ranked above it (showing {len(near)} of "
                                  f"{len(e.near_misses)})", near, has_spans, width))
    holes = e.likely_holes if e.labelled and r is not None else tuple(c for c in e.ranked if c.likely_hole)
    if e.labelled and holes:
        parts.append(Text(f"◆ {len(holes)} chunk(s) not labelled relevant hold an answer string of the row "
                          f"({', '.join(dict.fromkeys(c.doc_id for c in holes[:5]))}): likely holes in the labels; "
                          f"judge them with `ragbench judge pool {e.sweep_id}`", style="magenta"))
    if e.labelled and e.missing_relevant_docs and r is not None:
        parts.append(Text(f"Relevant documents not retrieved at all: {', '.join(e.missing_relevant_docs)}",
                          style="yellow"))
    return Group(*parts)
