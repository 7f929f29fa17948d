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
import json
import random
import re
import shlex
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
#: the model ``questions generate`` uses unless told otherwise: measured on the demo folder and 12 pages of Debian's
#: Python 3.11 HOWTOs (docs/your-documents.md), SmolLM2-135M's quotes locate but most of its questions are not
#: answered by them; Qwen2.5-Coder-1.5B's are
QUESTIONS_MODEL = "qwen2.5-coder-1.5b"
MIN_PASSAGE_WORDS = 12
MIN_QUOTE_WORDS = 3

#: The instruction and one worked example. The example is domain-neutral (opening hours of a library: no
#: documentation's subject), so a reply that copies it is recognisable and rejected (:func:`copies_example`) rather
#: than kept as a question about the user's documents. Quote first: small models copy a sentence more faithfully
#: before they paraphrase it into a question. The reply is JSON constrained by :func:`reply_schema`.
INSTRUCTION = ("You pick one sentence of a documentation passage, copied word for word, and write a question that "
               "this sentence answers, in your own words. Reply with JSON: {\"quote\": ..., \"question\": ...}.")
EXAMPLE_PASSAGE = ("## Opening hours\n\nThe reading room opens at nine on weekdays and closes at six. On public "
                   "holidays the building stays closed.")
EXAMPLE_QUOTE = "On public holidays the building stays closed."
EXAMPLE_QUESTION = "Can I visit on a public holiday?"
EXAMPLE = (f"PASSAGE:\n{EXAMPLE_PASSAGE}",
           json.dumps({"quote": EXAMPLE_QUOTE, "question": EXAMPLE_QUESTION}, ensure_ascii=False))
#: a quote candidate longer than this (characters) is left out of the schema's choices
MAX_QUOTE_CHARS = 300
MAX_QUESTION_CHARS = 200
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(\[*_])")
_LIST_MARK = re.compile(r"^\s*(?:[-*+>]|\d+[.)])\s+")


def prompt(passage: str) -> list[dict[str, str]]:
    """The chat messages asking for one quote and question about ``passage``."""
    return [{"role": "system", "content": INSTRUCTION}, {"role": "user", "content": EXAMPLE[0]},
            {"role": "assistant", "content": EXAMPLE[1]}, {"role": "user", "content": f"PASSAGE:\n{passage}"}]


def _paragraphs(passage: str) -> list[str]:
    """The prose of a passage, one string per paragraph or list item (its wrapped lines joined by spaces): headings,
    tables, code fences and what they enclose, and doctest lines left out."""
    out: list[str] = []
    current: list[str] = []
    fenced = False

    def flush() -> None:
        if current:
            out.append(" ".join(current))
            current.clear()

    for line in passage.splitlines():
        s = line.strip()
        if s.startswith(("```", "~~~")):
            fenced = not fenced
            flush()
        elif fenced or not s or s.startswith(("#", "|", ">>>")):
            flush()
        elif _LIST_MARK.match(line):
            flush()
            current.append(_LIST_MARK.sub("", line).strip())
        else:
            current.append(s)
    flush()
    return out


def quote_candidates(passage: str, doc_text: str) -> list[str]:
    """The sentences of ``passage`` a quote may be: its paragraphs and list items (:func:`_paragraphs`) split after
    ``.``/``!``/``?``, each with :data:`MIN_QUOTE_WORDS`+ words, at most :data:`MAX_QUOTE_CHARS` characters and
    located exactly once in ``doc_text`` by :func:`~ragbench.data.quotes.locate_quote` (so any choice labels one
    span), in passage order without repeats."""
    out: list[str] = []
    for paragraph in _paragraphs(passage):
        for sentence in _SENTENCE_END.split(paragraph):
            s = sentence.strip().rstrip(" ,;:")
            if (len(s.split()) >= MIN_QUOTE_WORDS and len(s) <= MAX_QUOTE_CHARS and s not in out
                    and len(locate_quote(s, doc_text)) == 1):
                out.append(s)
    return out


def reply_schema(candidates: list[str]) -> dict:
    """The JSON schema a reply must match: ``{"quote": ..., "question": ...}`` (quote first), the quote one of
    ``candidates`` (:func:`quote_candidates`; a free string of :data:`MIN_QUOTE_WORDS`+ words when there is none),
    the question 10 to :data:`MAX_QUESTION_CHARS` characters. llama-server turns it into a grammar, so the model can
    only emit a reply that parses."""
    quote = ({"type": "string", "enum": candidates} if candidates
             else {"type": "string", "minLength": 12, "maxLength": MAX_QUOTE_CHARS})
    return {"type": "object", "properties": {"quote": quote, "question": {"type": "string", "minLength": 10,
                                                                          "maxLength": MAX_QUESTION_CHARS}},
            "required": ["quote", "question"], "additionalProperties": False}


def response_format(schema: dict) -> dict:
    """The request field that constrains a reply to ``schema`` (OpenAI's ``response_format``, which llama-server,
    vLLM and hosted APIs read)."""
    return {"response_format": {"type": "json_schema", "json_schema": {"name": "synthetic_question",
                                                                        "schema": schema}}}


def _key(text: str) -> str:
    """Text compared as a reader would: :func:`~ragbench.data.quotes.normalize`-d, end punctuation dropped."""
    return normalize(text)[0].strip(" .?!,;:\"'")


def copies_example(question: str, quote: str) -> bool:
    """Whether a generated row copies the prompt's example instead of the passage: its question or quote equals
    the example's (:func:`_key`: case, whitespace and end punctuation aside), or the question has the same content
    words (:func:`content_words`) as the example's question."""
    if _key(question) == _key(EXAMPLE_QUESTION) or _key(quote) == _key(EXAMPLE_QUOTE):
        return True
    words = set(content_words(question))
    return bool(words) and words == set(content_words(EXAMPLE_QUESTION))


def not_a_question(question: str, quote: str) -> bool:
    """Whether the "question" is none: it has no question mark, or it is a piece of the quote itself (compared by
    :func:`_key`): a small model copying the sentence twice."""
    return "?" not in question or _key(question) in _key(quote)


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


#: the stages of the yield funnel, in order: each counts the passages that reached it
STAGES = ("sampled", "replied", "parsed", "quote located", "kept")
#: why a generation was dropped, by the stage it failed to reach
DROP_STAGE = {"no reply": "replied", "unparsed": "parsed", "quote not located": "quote located",
              "quote ambiguous": "quote located", "copies the example": "kept", "not a question": "kept",
              "duplicate": "kept"}


@dataclass
class Generation:
    """What :func:`generate_questions` produced: the kept questions, the dropped generations by reason
    (:data:`DROP_STAGE`) and the seconds the LLM took (a cached reply counts the seconds it took when fetched)."""

    questions: list[SyntheticQuestion] = field(default_factory=list)
    dropped: Counter = field(default_factory=Counter)
    asked: int = 0  # passages sent to the LLM (cached answers included)
    cached: int = 0
    llm_seconds: float = 0.0
    model: str = ""  # the model file's identity, once known
    skipped: int = 0  # sampled passages with no sentence to quote (code, tables): not sent to the LLM

    @property
    def mean_overlap(self) -> float:
        return sum(q.lexical_overlap for q in self.questions) / len(self.questions) if self.questions else 0.0

    def yields(self) -> dict[str, int]:
        """The funnel: passages ``sampled`` (asked), ``replied``, ``parsed``, ``quote located`` (exactly once in its
        document) and ``kept``, then ``rejected as example``, ``not a question`` and ``duplicate`` (dropped after
        locating). Each stage is the one before less the drops that failed it
        (:data:`DROP_STAGE`)."""
        out, left = {}, self.asked
        for stage in STAGES:
            left -= sum(n for why, n in self.dropped.items() if DROP_STAGE.get(why) == stage)
            out[stage] = self.asked if stage == "sampled" else left
        out["rejected as example"] = self.dropped["copies the example"]
        for why in ("not a question", "duplicate"):
            out[why] = self.dropped[why]
        return out

    @property
    def seconds_per_question(self) -> float | None:
        """LLM seconds per kept question (None when none was kept)."""
        return self.llm_seconds / len(self.questions) if self.questions else None

    def describe(self) -> str:
        """Two lines: kept, dropped by reason, mean overlap; then the yield funnel and the LLM's cost."""
        drops = ", ".join(f"{n} {why}" for why, n in sorted(self.dropped.items())) or "none"
        y = self.yields()
        funnel = ", ".join(f"{y[stage]} {stage}" for stage in STAGES)
        cost = (f"; LLM {self.llm_seconds:.0f} s, {self.seconds_per_question:.1f} s per kept question"
                if self.questions else "")
        skipped = f"; {self.skipped} code-only passage(s) skipped" if self.skipped else ""
        return (f"{len(self.questions)} synthetic question(s) from {self.asked} passage(s) ({self.cached} answered "
                f"from the LLM cache){skipped}; dropped: {drops}; mean lexical overlap with the source passage "
                f"{self.mean_overlap:.0%}\nyields: {funnel} ({y['rejected as example']} rejected as copies of the "
                f"prompt's example, {y['not a question']} not questions, {y['duplicate']} duplicates){cost}")


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


@dataclass
class RowScreen:
    """Decides whether a parsed ``(question, quote)`` of a document is kept; remembers what was kept, so a repeat is
    a duplicate. :meth:`reject` gives the reason to drop it (the names of :data:`DROP_STAGE`) or None, in this
    order: ``quote not located`` (not in the document, or under :data:`MIN_QUOTE_WORDS` words), ``quote
    ambiguous`` (more than once in it), ``copies the example`` (:func:`copies_example`), ``not a question``
    (:func:`not_a_question`), ``duplicate`` (the question, compared by :func:`_key`, or the quote's place in the same
    document was kept already). No rule asks a question to share words with its quote: a good question paraphrases
    (Qwen's "What could be causing the connection to be refused?" for "nothing listens on the port")."""

    seen: set = field(default_factory=set)

    def reject(self, question: str, quote: str, doc_id: str, doc_text: str) -> str | None:
        hits = locate_quote(quote, doc_text) if len(quote.split()) >= MIN_QUOTE_WORDS else []
        reason = ("quote not located" if not hits else "quote ambiguous" if len(hits) > 1
                  else "copies the example" if copies_example(question, quote)
                  else "not a question" if not_a_question(question, quote)
                  else "duplicate" if _key(question) in self.seen or (doc_id, hits[0]) in self.seen else None)
        if reason is None:
            self.seen.update({_key(question), (doc_id, hits[0])})
        return reason


_LINE = re.compile(r"^\s*\**\s*(question|quote)\s*\**\s*[:：]\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)


def parse_reply(text: str) -> tuple[str, str] | None:
    """``(question, quote)`` from a JSON reply ``{"quote": ..., "question": ...}`` (what :func:`reply_schema`
    asks for), else from ``QUESTION:`` and ``QUOTE:`` lines (an endpoint that ignored the schema), or None."""
    found: dict[str, str] = {}
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        found = {k: v.strip().strip('"“”') for k, v in data.items() if k in ("question", "quote") and
                 isinstance(v, str)}
    else:
        for key, value in _LINE.findall(text):
            found.setdefault(key.lower(), value.strip().strip('"“”'))
    if not found.get("question") or not found.get("quote"):
        return None
    return found["question"], found["quote"]


def generate_questions(corpus: pl.DataFrame, client, n: int, *, seed: int = 0,
                       max_attempts: int | None = None) -> Generation:
    """Ask ``client`` (a :class:`~ragbench.generation.llm.client.ChatClient`) for up to ``n`` questions, one per
    passage of :func:`sample_passages`, until ``n`` are kept or ``max_attempts`` (default ``3 n``) passages were
    asked. Each request carries :func:`reply_schema` of its passage's :func:`quote_candidates`; a passage with none
    (code, a table) is skipped unasked (:attr:`Generation.skipped`). Dropped (see
    :meth:`Generation.yields`): ``no reply`` (the request failed), ``unparsed`` (no question and quote in it),
    ``quote not located`` (not in the source document, or shorter than :data:`MIN_QUOTE_WORDS` words),
    ``quote ambiguous`` (found more than once in it), ``copies the example`` (:func:`copies_example`),
    ``not a question`` (:func:`not_a_question`),
    ``duplicate`` (a question already kept, or a second question on a quote already kept)."""
    from ragbench.generation.llm import LLMClientError

    if n < 1:
        raise RagbenchError(f"--n must be at least 1, got {n}")
    docs = dict(corpus.select("doc_id", "text").iter_rows())
    passages = sample_passages(corpus, seed)
    if not passages:
        raise RagbenchError(f"no passage of {MIN_PASSAGE_WORDS}+ words in the {len(docs)} document(s)")
    out, screen, failures = Generation(), RowScreen(), 0
    for doc_id, passage in passages:
        if len(out.questions) >= n or out.asked >= (max_attempts or 3 * n):
            break
        candidates = quote_candidates(passage, docs[doc_id])
        if not candidates:  # code or a table only: no sentence a question could quote; not sent
            out.skipped += 1
            continue
        out.asked += 1
        try:
            reply = client.complete(prompt(passage), extra=response_format(reply_schema(candidates)))
        except LLMClientError:
            failures += 1
            if failures >= 3 and failures == out.asked:  # nothing ever answered: the endpoint is down, say so
                raise
            out.dropped["no reply"] += 1
            continue
        out.cached += reply.cached
        out.llm_seconds += reply.seconds if not reply.cached else (reply.recorded_seconds or 0.0)
        parsed = parse_reply(reply.text)
        if parsed is None:
            out.dropped["unparsed"] += 1
            continue
        question, quote = parsed[0], parsed[1].rstrip(" .,;:")  # "…first node." of "…first node; it" still quotes
        reason = screen.reject(question, quote, doc_id, docs[doc_id])
        if reason:
            out.dropped[reason] += 1
            continue
        out.questions.append(SyntheticQuestion(question, doc_id, quote, round(lexical_overlap(question, passage), 3)))
    log.info("questions: %s", out.describe())
    return out


def next_command(root: Path, out: Path) -> str:
    """The ``ragbench datasets validate`` command that checks the written file, runnable from the current directory:
    the folder as given, the questions file relative to it when it lies inside (how ``--questions`` resolves), else
    its absolute path."""
    root, out = Path(root), Path(out)
    try:
        questions = str(out.resolve().relative_to(root.resolve()))
    except ValueError:  # outside the folder: only an absolute path names it from the folder
        questions = str(out.resolve())
    return f"ragbench datasets validate {shlex.quote(str(root))} --questions {shlex.quote(questions)}"


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
    folder's files (``include`` / ``exclude`` globs), by the local ``model`` (None: ``settings.llm_model``, else
    :data:`QUESTIONS_MODEL`) on ``threads`` CPU threads, at most ``max_tokens`` per reply and ``max_attempts`` passages
    asked (None: 3 n)."""

    n: int
    out: Path | None = None
    force: bool = False
    seed: int = 0
    model: str | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    threads: int = 1
    max_tokens: int = 160
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
    binary, weights = locate_llama_server(settings), locate_model(settings, r.model or settings.llm_model
                                                                  or QUESTIONS_MODEL)
    scan = scan_folder(root, r.include, r.exclude, cache_root=Path(settings.home) / "cache", questions=out)
    if not scan.documents:
        raise RagbenchError(f"{root}: no documents to write questions about")
    corpus = corpus_table(scan)
    with LocalLLMServer(binary, weights, ServerOptions(ctx=4096, threads=r.threads)) as server:
        log.info("LLM: llama-server pid %s serving %s", server.pid, server.model_id)
        # 300 s a reply: Qwen2.5-1.5B took over 60 s for one on 2 loaded cores (a "no reply" at the client's default)
        with ChatClient(server.base_url, server.model_id, ChatOptions(max_tokens=r.max_tokens, timeout=300.0),
                        cache_dir=Path(settings.home) / "cache" / "llm") as client:
            generation = generate_questions(corpus, client, n, seed=seed, max_attempts=r.max_attempts)
        generation.model = server.model_id
    write_questions(out, generation.questions)
    return out, generation
