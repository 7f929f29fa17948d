"""How far an LLM assessor agrees with people, measured before its grades count.

The assessor (:mod:`ragbench.judgments.assessor`) grades a seeded sample of pairs that people judged:

* the dataset's own labels (its qrels: the labelled positives, relevance >= 1, and any pair labelled 0);
* pool rows a person filled (``source = person``), the 0s among them being the negatives.

Documents nobody judged are never used as negatives: that they are not relevant is exactly what a label hole
makes false. With no pair a person judged not relevant, κ cannot be estimated (every human label is the same), the
agreement is stored with that note and the assessor is not trusted.

Agreement is Cohen's κ, unweighted, on relevant / not relevant (grade >= :data:`RELEVANT_GRADE` on both sides: the
``relevance > 0`` every measure uses), plus the 4 × 4 confusion matrix of grades 0-3 (person rows, assessor columns;
a label above 3 is counted as 3). ``judge merge`` refuses an assessor's grades without ``--force`` while its latest κ
is below :data:`KAPPA_THRESHOLD` (:func:`assessor_trusted`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime

import polars as pl

from ragbench.results.store_judgments import KAPPA_THRESHOLD, Agreement

__all__ = ["KAPPA_THRESHOLD", "RELEVANT_GRADE", "GRADES", "Agreement", "JudgedPair", "assessor_trusted",
           "calibration_sample", "cohen_kappa", "confusion_matrix", "measure", "people_pairs"]

#: a grade counts as relevant from here on, for people and the assessor alike (every measure reads relevance > 0)
RELEVANT_GRADE = 1
#: characters of a labelled document shown around its evidence: about a retrieved chunk's (a pool row's passage)
EVIDENCE_CHARS = 700
#: the grades of the scale (UMBRELA's 0-3)
GRADES = (0, 1, 2, 3)


@dataclass(frozen=True)
class JudgedPair:
    """A (question, passage) pair a person judged: ``grade`` is the person's label, ``origin`` where it comes from
    (``qrels``: the dataset's labels; ``pool``: a pool row a person filled)."""

    query_id: str
    question: str
    doc: str
    passage: str
    grade: int
    origin: str


def relevant(grade: int) -> bool:
    """Whether ``grade`` counts as relevant (>= :data:`RELEVANT_GRADE`)."""
    return grade >= RELEVANT_GRADE


def confusion_matrix(person: list[int], assessor: list[int]) -> tuple[tuple[int, ...], ...]:
    """The 4 × 4 table of grades: cell ``[i][j]`` counts the pairs a person graded ``i`` and the assessor ``j``
    (grades above 3 counted as 3)."""
    if len(person) != len(assessor):
        raise ValueError(f"{len(person)} person grades but {len(assessor)} assessor grades")
    table = [[0] * len(GRADES) for _ in GRADES]
    for p, a in zip(person, assessor):
        table[min(int(p), 3)][min(int(a), 3)] += 1
    return tuple(tuple(row) for row in table)


def binary_table(person: list[int], assessor: list[int]) -> tuple[tuple[int, int], tuple[int, int]]:
    """``((both not, person not / assessor relevant), (person relevant / assessor not, both relevant))``."""
    t = [[0, 0], [0, 0]]
    for p, a in zip(person, assessor):
        t[int(relevant(p))][int(relevant(a))] += 1
    return (t[0][0], t[0][1]), (t[1][0], t[1][1])


def cohen_kappa(person: list[int], assessor: list[int]) -> float | None:
    """Cohen's κ of relevant / not relevant, unweighted: ``κ = (p_o - p_e) / (1 - p_e)`` with ``p_o`` the share of
    pairs on which both agree and ``p_e = Σ_c p_person(c) · p_assessor(c)`` the agreement expected by chance
    (computed by scikit-learn's ``cohen_kappa_score``). None when it is undefined: no pair, or ``p_e = 1`` (both
    gave every pair the same single label)."""
    if not person:
        return None
    from sklearn.metrics import cohen_kappa_score

    p = [int(relevant(g)) for g in person]
    a = [int(relevant(g)) for g in assessor]
    if len(set(p)) == 1 and set(a) == set(p):
        return None  # p_e = 1: 0/0
    return float(cohen_kappa_score(p, a, labels=[0, 1]))


def measure(model: str, prompt_version: int, dataset: tuple[str, str], pairs: list[JudgedPair],
            grades: list[int], *, measured_at: datetime, seconds_per_pair: float | None = None,
            seed: int = 0) -> Agreement:
    """The :class:`Agreement` of the assessor's ``grades`` with the people's grades of ``pairs`` (same order);
    ``dataset`` is ``(name, fingerprint)``."""
    person = [p.grade for p in pairs]
    n_rel = sum(relevant(g) for g in person)
    note = ""
    if not pairs:
        note = "no pair a person judged"
    elif n_rel == len(pairs):
        note = ("no pair a person judged not relevant, so κ cannot be estimated (documents nobody judged are not "
                "negatives); mark some pool rows 0 by hand, then assess again")
    elif n_rel == 0:
        note = "no pair a person judged relevant, so κ cannot be estimated"
    kappa = cohen_kappa(person, grades) if not note else None
    if kappa is None and not note:
        note = "κ undefined: every pair got the same label from both"
    return Agreement(model=model, prompt_version=prompt_version, dataset_name=dataset[0],
                     dataset_fingerprint=dataset[1], n=len(pairs), n_relevant=n_rel, kappa=kappa,
                     confusion=confusion_matrix(person, grades), measured_at=measured_at,
                     seconds_per_pair=seconds_per_pair, seed=seed, note=note,
                     binary=binary_table(person, grades))


# ---------------------------------------------------------------- the sample people judged
def evidence_passage(text: str, spans: list[tuple[int, int]], max_chars: int) -> str:
    """What a person read to label a document: the window of ``max_chars`` around its first evidence span (cut at
    whitespace), or the start of the document when it has no span."""
    if not spans:
        return _cut(text[:max_chars + 200], max_chars)
    start, end = min(spans)
    pad = max(0, (max_chars - (end - start)) // 2)
    lo, hi = max(0, start - pad), min(len(text), max(end, start + max_chars - pad))
    if lo > 0:
        space = text.find(" ", lo, start) if lo < start else -1
        lo = space + 1 if space >= 0 else lo
    return _cut(text[lo:hi + 200], hi - lo)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text.strip()
    space = text.rfind(" ", 0, limit)
    return text[:space if space > limit // 2 else limit].strip()


def _person_grade(row: dict) -> int | None:
    """A pool row's grade when a person gave it (``source`` blank or ``person``, ``relevance`` 0-3), else None."""
    value = row.get("relevance")
    if str(row.get("source") or "").strip() not in ("", "person") or value is None or str(value).strip() == "":
        return None
    try:
        grade = float(value)
    except ValueError:
        return None
    return int(grade) if grade.is_integer() and 0 <= grade <= 3 else None


def people_pairs(dataset, pool_rows: list[dict], labels: pl.DataFrame | None = None,
                 max_chars: int | None = None) -> list[JudgedPair]:
    """Every pair a person judged: the pool rows a person filled (``source`` blank or ``person``, a relevance
    0-3), then ``labels`` (``query_id, doc_id, relevance``; default: the dataset's own qrels) with each document's
    passage (:func:`evidence_passage`); one pair per (query, document), the pool row winning (it was read as a
    passage). An assessor's grade is never a person's. ``max_chars``: the evidence window (default
    :data:`EVIDENCE_CHARS`)."""
    max_chars = EVIDENCE_CHARS if max_chars is None else max_chars
    questions = dict(zip(dataset.queries["query_id"].to_list(), dataset.queries["text"].to_list()))
    out: dict[tuple[str, str], JudgedPair] = {}
    for r in pool_rows:
        grade = _person_grade(r)
        if grade is not None:
            key = (str(r["query_id"]), str(r["doc"]))
            out[key] = JudgedPair(key[0], str(r.get("question") or questions.get(key[0], "")), key[1],
                                  str(r.get("passage") or ""), grade, "pool")
    if labels is None:
        own = getattr(dataset, "primary_qrels", None)
        labels = own if own is not None else dataset.qrels
    labels = labels.filter(pl.col("query_id").is_in(list(questions)))
    texts = dict(zip(dataset.corpus["doc_id"].to_list(), dataset.corpus["text"].to_list()))
    spans: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for q, d, s, e in dataset.spans.select("query_id", "doc_id", "start", "end").iter_rows():
        spans.setdefault((q, d), []).append((s, e))
    for q, d, rel in labels.select("query_id", "doc_id", "relevance").iter_rows():
        if (q, d) not in out and d in texts:
            out[(q, d)] = JudgedPair(q, questions[q], d, evidence_passage(texts[d], spans.get((q, d), []), max_chars),
                                     int(rel), "qrels")
    return sorted(out.values(), key=lambda p: (p.query_id, p.doc))


def calibration_sample(pairs: list[JudgedPair], n: int, seed: int) -> list[JudgedPair]:
    """A seeded sample of at most ``n`` pairs: the not-relevant ones first (up to half of ``n``: they are the
    scarce side), the relevant ones filling the rest, then not-relevant ones again if relevant ones run out; in a
    stable order (query, document)."""
    rng = random.Random(seed)
    neg = [p for p in pairs if not relevant(p.grade)]
    pos = [p for p in pairs if relevant(p.grade)]
    rng.shuffle(neg)
    rng.shuffle(pos)
    take_neg = min(len(neg), n // 2)
    take_pos = min(len(pos), n - take_neg)
    take_neg = min(len(neg), n - take_pos)
    return sorted(neg[:take_neg] + pos[:take_pos], key=lambda p: (p.query_id, p.doc))


# ---------------------------------------------------------------- the gate
def assessor_trusted(store, model: str, dataset_name: str | None = None) -> tuple[bool, str]:
    """``(trusted, why)`` for the assessor ``model`` (its identity, as in a pool row's ``judge``): trusted when its
    latest agreement with people (on ``dataset_name`` when given) has κ >= :data:`KAPPA_THRESHOLD`. ``judge merge``
    refuses its grades otherwise, unless forced."""
    found = store.assessor_agreements(model=model, dataset_name=dataset_name, limit=1)
    if not found:
        return False, (f"assessor {model} has no agreement with people on record: run `ragbench judge assess` on a "
                       "pool with some rows judged by a person, or pass --force")
    a = found[0]
    return a.trusted, f"assessor {model}: {a.describe()} (measured {a.measured_at:%Y-%m-%d %H:%M})"


def refuse_untrusted(store, path, judgments: list, dataset_name: str | None = None, force: bool = False) -> list[str]:
    """The gate of ``judge merge``: for each assessor whose rows are in ``judgments`` (``source =
    assessor:<model>``, the model in ``judge``), :func:`assessor_trusted` must say yes, else a
    :class:`ragbench.core.errors.RagbenchError` naming ``path`` and what to do is raised; with ``force`` the reasons
    are logged and returned instead. ``store`` None: no agreement can be read, so every assessor is untrusted."""
    from ragbench.core.errors import RagbenchError
    from ragbench.core.progress import log

    models = sorted({j.judge or j.source.removeprefix("assessor:") for j in judgments
                     if j.source.startswith("assessor:")})
    refused = []
    for model in models:
        ok, why = assessor_trusted(store, model, dataset_name) if store is not None else \
            (False, f"assessor {model}: no results store to read its agreement with people from")
        if not ok:
            refused.append(why)
    if refused and not force:
        raise RagbenchError(f"{path}: not merged: {refused[0]}" + (f" (and {len(refused) - 1} more assessor(s))"
                                                                     if len(refused) > 1 else ""))
    for why in refused:
        log.warning("merging an untrusted assessor's grades (--force): %s", why)
    return refused
