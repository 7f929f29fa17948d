"""Synthetic questions for a folder that has none (``ragbench questions generate DIR``).

The local LLM reads a seeded sample of passages (chunks of the converted documents) and writes, for each, one
question and a quote copied from the passage that answers it. A generation is kept only when its quote is located,
exactly once, in the source document's converted text by the same locator the questions loader uses
(:func:`ragbench.data.quotes.locate_quote`); the others are dropped and counted by reason. Every kept row is
marked ``synthetic`` and carries its :func:`lexical_overlap` with the passage.

Why the overlap matters: a question written while looking at the passage reuses its words, which BM25 rewards and
real users, who do not know the documentation's vocabulary, do not do. The report warns when the mean overlap is
high (:data:`HIGH_OVERLAP`) and keeps synthetic and real questions apart in the per-class breakdown.

LLM responses are cached on disk by (model weights, prompt with the passage, sampling parameters) by
:class:`~ragbench.generation.llm.client.ChatClient`, like every other LLM call: a rerun asks the model nothing new.
"""

from __future__ import annotations

import csv
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from ragbench.chunking.markdown import MarkdownChunker
from ragbench.core.errors import RagbenchError
from ragbench.core.progress import log
from ragbench.data.labels import HIGH_OVERLAP  # noqa: F401 (re-exported)
from ragbench.data.quotes import locate_quote, normalize

#: A small English stop-word list: function words (articles, pronouns, auxiliaries, prepositions, conjunctions) and
#: question words. What remains of a question are its content words.
STOP_WORDS = frozenset("""
a about above after again all also am an and any are as at be because been before being below between both but by
can could did do does doing done down during each few for from further had has have having he her here hers him his
how i if in into is it its itself just me more most my no nor not now of off on once only or other our ours out over
own same she should so some such than that the their theirs them then there these they this those through to too
under until up very was we were what when where which while who whom whose why will with would you your yours
""".split())
_TOKEN = re.compile(r"[^\W_]+(?:[._'’-][^\W_]+)*")

#: the columns of a generated questions file
COLUMNS = ("question", "doc", "quote", "synthetic", "lexical_overlap")
DEFAULT_FILE = "questions.synthetic.csv"
MIN_PASSAGE_WORDS = 12
MIN_QUOTE_WORDS = 3

#: The instruction and one worked example (from another domain, so its words do not leak into the questions).
#: Quote first: small models copy a sentence more faithfully before they paraphrase it into a question (SmolLM2
#: located 0 of 4 quotes asked question-first, 3 of 10 quote-first on the test folder; Qwen2.5-1.5B 4 of 4 even
#: question-first).
INSTRUCTION = ("You copy one sentence of a documentation passage word for word, then write a question that this "
               "sentence answers. Reply with two lines: QUOTE: ... and QUESTION: ...")
EXAMPLE = ("PASSAGE:\n## Shipping\n\nOrders placed before noon leave the warehouse on the same day. Parcels to "
           "islands take two extra days.",
           "QUOTE: Parcels to islands take two extra days.\nQUESTION: How long does delivery to an island take?")


def prompt(passage: str) -> list[dict[str, str]]:
    """The chat messages asking for one quote and question about ``passage``."""
    return [{"role": "system", "content": INSTRUCTION}, {"role": "user", "content": EXAMPLE[0]},
            {"role": "assistant", "content": EXAMPLE[1]}, {"role": "user", "content": f"PASSAGE:\n{passage}"}]


def content_words(text: str) -> list[str]:
    """The content words of ``text``: lowercased word tokens (letters and digits; ``_ ' . -`` inside a token join
    it, so ``queue.max_inflight_bytes``, ``NMB-4013`` and ``3.4`` are one word each) that are not in
    :data:`STOP_WORDS`, in order (repeats kept)."""
    return [w for w in _TOKEN.findall(text.lower()) if w not in STOP_WORDS]


def lexical_overlap(question: str, passage: str) -> float:
    """Share of the question's distinct content words (:func:`content_words`) that also occur in the passage:
    ``|Q ∩ P| / |Q|`` with ``Q``, ``P`` the sets of content words (0.0 for a question with no content word).

    1.0 = every content word of the question is in the passage; a real user's question scores much lower.
    """
    q = set(content_words(question))
    if not q:
        return 0.0
    return len(q & set(content_words(passage))) / len(q)


@dataclass(frozen=True)
class SyntheticQuestion:
    question: str
    doc: str
    quote: str
    lexical_overlap: float


@dataclass
class Generation:
    """What :func:`generate_questions` produced: the kept questions and the dropped generations by reason."""

    questions: list[SyntheticQuestion] = field(default_factory=list)
    dropped: Counter = field(default_factory=Counter)
    asked: int = 0  # passages sent to the LLM (cached answers included)
    cached: int = 0

    @property
    def mean_overlap(self) -> float:
        return sum(q.lexical_overlap for q in self.questions) / len(self.questions) if self.questions else 0.0

    def describe(self) -> str:
        """One line: kept, dropped by reason, mean overlap."""
        drops = ", ".join(f"{n} {why}" for why, n in sorted(self.dropped.items())) or "none"
        return (f"{len(self.questions)} synthetic question(s) from {self.asked} passage(s) ({self.cached} answered "
                f"from the LLM cache); dropped: {drops}; mean lexical overlap with the source passage "
                f"{self.mean_overlap:.0%}")


def sample_passages(corpus: pl.DataFrame, seed: int = 0, max_tokens: int = 160) -> list[tuple[str, str]]:
    """``(doc_id, passage)`` of every chunk with at least :data:`MIN_PASSAGE_WORDS` words, in a seeded random
    order (markdown sections of at most ``max_tokens`` tokens: the chunks a sweep would judge)."""
    chunker = MarkdownChunker(max_tokens=max_tokens)
    passages = []
    for doc_id, text in corpus.select("doc_id", "text").iter_rows():
        for start, end in chunker.spans(text):
            passage = text[start:end].strip()
            if len(passage.split()) >= MIN_PASSAGE_WORDS:
                passages.append((doc_id, passage))
    random.Random(seed).shuffle(passages)
    return passages


_LINE = re.compile(r"^\s*\**\s*(question|quote)\s*\**\s*[:：]\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)


def parse_reply(text: str) -> tuple[str, str] | None:
    """``(question, quote)`` from a reply with ``QUESTION:`` and ``QUOTE:`` lines, or None."""
    found: dict[str, str] = {}
    for key, value in _LINE.findall(text):
        found.setdefault(key.lower(), value.strip().strip('"“”'))
    if not found.get("question") or not found.get("quote"):
        return None
    return found["question"], found["quote"]


def generate_questions(corpus: pl.DataFrame, client, n: int, *, seed: int = 0,
                       max_attempts: int | None = None) -> Generation:
    """Ask ``client`` (a :class:`~ragbench.generation.llm.client.ChatClient`) for up to ``n`` questions, one per
    passage of :func:`sample_passages`, until ``n`` are kept or ``max_attempts`` (default ``3 n``) passages were
    asked. Dropped: ``unparsed`` (no QUESTION/QUOTE lines), ``quote not located`` (not in the source document, or
    shorter than :data:`MIN_QUOTE_WORDS` words), ``quote ambiguous`` (found more than once in it), ``duplicate``
    (a question already kept)."""
    if n < 1:
        raise RagbenchError(f"--n must be at least 1, got {n}")
    docs = dict(corpus.select("doc_id", "text").iter_rows())
    passages = sample_passages(corpus, seed)
    if not passages:
        raise RagbenchError(f"no passage of {MIN_PASSAGE_WORDS}+ words in the {len(docs)} document(s)")
    out, seen = Generation(), set()
    for doc_id, passage in passages[: max_attempts or 3 * n]:
        if len(out.questions) >= n:
            break
        reply = client.complete(prompt(passage))
        out.asked += 1
        out.cached += reply.cached
        parsed = parse_reply(reply.text)
        if parsed is None:
            out.dropped["unparsed"] += 1
            continue
        question, quote = parsed[0], parsed[1].rstrip(" .,;:")  # "…first node." of "…first node; it" still quotes
        hits = locate_quote(quote, docs[doc_id]) if len(quote.split()) >= MIN_QUOTE_WORDS else []
        if not hits:
            out.dropped["quote not located"] += 1
            continue
        if len(hits) > 1:
            out.dropped["quote ambiguous"] += 1
            continue
        key = normalize(question)[0]
        if key in seen:
            out.dropped["duplicate"] += 1
            continue
        seen.add(key)
        out.questions.append(SyntheticQuestion(question, doc_id, quote, round(lexical_overlap(question, passage), 3)))
    log.info("questions: %s", out.describe())
    return out


def write_questions(path: Path, questions: list[SyntheticQuestion]) -> None:
    """Write the questions as CSV with :data:`COLUMNS` (``synthetic`` is ``true`` on every row)."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(COLUMNS)
        for q in questions:
            writer.writerow([q.question, q.doc, q.quote, "true", f"{q.lexical_overlap:.3f}"])


@dataclass(frozen=True)
class QuestionsRequest:
    """What ``questions generate`` asks for: up to ``n`` questions written to ``out`` (None:
    ``<root>/questions.synthetic.csv``; replaced only with ``force``), from a ``seed``-ed sample of passages of the
    folder's files (``include`` / ``exclude`` globs), by the local ``model`` (None: ``settings.llm_model``, else the
    packaged default) on ``threads`` CPU threads, at most ``max_tokens`` per reply and ``max_attempts`` passages
    asked (None: 3 n)."""

    n: int
    out: Path | None = None
    force: bool = False
    seed: int = 0
    model: str | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    threads: int = 1
    max_tokens: int = 96
    max_attempts: int | None = None


def generate_for_folder(root: Path, settings, request: QuestionsRequest) -> tuple[Path, Generation]:
    """Convert the folder, start the local ``llama-server`` with the request's model, generate up to ``n``
    questions and write them (see :class:`QuestionsRequest`). An existing file is never overwritten without
    ``force``; every input is checked before the LLM starts. Returns the file and the :class:`Generation`."""
    from ragbench.data.folder import corpus_table, scan_folder
    from ragbench.generation.llm.client import ChatClient, ChatOptions
    from ragbench.generation.llm.server import LocalLLMServer, ServerOptions, locate_llama_server, locate_model

    r = request
    n, out, seed = r.n, r.out, r.seed
    root = Path(root)
    if not root.is_dir():
        raise RagbenchError(f"{root}: folder not found")
    if n < 1:
        raise RagbenchError(f"--n must be at least 1, got {n}")
    out = Path(out) if out is not None else root / DEFAULT_FILE
    if out.suffix.lower() != ".csv":
        raise RagbenchError(f"{out}: generated questions are written as CSV (.csv)")
    if out.exists() and not r.force:
        raise RagbenchError(f"{out} exists: not overwritten (it may hold your questions); pass --force to replace "
                            f"it, or --out another file")
    binary, weights = locate_llama_server(settings), locate_model(settings, r.model)
    scan = scan_folder(root, r.include, r.exclude, cache_root=Path(settings.home) / "cache", questions=out)
    if not scan.documents:
        raise RagbenchError(f"{root}: no documents to write questions about")
    corpus = corpus_table(scan)
    with LocalLLMServer(binary, weights, ServerOptions(ctx=4096, threads=r.threads)) as server:
        log.info("LLM: llama-server pid %s serving %s", server.pid, server.model_id)
        with ChatClient(server.base_url, server.model_id, ChatOptions(max_tokens=r.max_tokens),
                        cache_dir=Path(settings.home) / "cache" / "llm") as client:
            generation = generate_questions(corpus, client, n, seed=seed, max_attempts=r.max_attempts)
    write_questions(out, generation.questions)
    return out, generation
