"""An LLM assessor: grades (question, passage) pairs 0-3 the way UMBRELA does, checked against people first.

**The prompt** (:data:`SYSTEM_PROMPT`, :data:`USER_TEMPLATE`, version :data:`PROMPT_VERSION`) follows UMBRELA
(Upadhyay et al., 2024, "UMBRELA: UMbrela is the (Open-Source Reproduction of the) Bing RELevance Assessor"), which
reproduces the relevance levels of Thomas et al. (2024): 0 = the passage has nothing to do with the question, 1 = it
is related but does not answer it, 2 = it answers it in part, or among other text, 3 = it is dedicated to the
question and answers it. Changing the prompt's text must bump :data:`PROMPT_VERSION`: cached grades and stored
agreements are keyed by it.

**The reply** is constrained per request: a local ``llama-server`` gets the grammar :data:`GRADE_GRAMMAR`
(exactly ``{"grade": N}``, no whitespace a small model could pad it with until its tokens run out), an endpoint
the JSON schema :data:`GRADE_SCHEMA` (``response_format`` of ``/v1/chat/completions``, as OpenAI's API takes it).
A reply that still does not parse to ``{"grade": 0|1|2|3}`` (cut short, an endpoint that ignores the schema) is
asked again once with twice the room (:data:`MAX_REPLY_TOKENS`); a second bad reply leaves the pair **ungraded**
(``Grade.grade`` None, a warning naming the reply, counted in the run's result), never a guess and never the end
of the run.

**The cache**: one entry per (model identity, prompt version, question, passage) under the home's
``cache/assessor/`` (:class:`GradeCache`, a :class:`ragbench.core.cache.BlobCache`: written atomically, checked on
every read; a damaged entry is quarantined and graded again). A rerun whose pairs are all cached never starts the
local server. A local model's identity names its exact weights (:func:`ragbench.generation.llm.server.
model_identity`); an endpoint's is the model name sent.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ragbench.core.cache import BlobCache, DamagedEntry
from ragbench.core.errors import RagbenchError
from ragbench.core.hashing import stable_hash
from ragbench.core.progress import log

#: bump when the prompt, the schema or the passage cut changes: grades and agreements are keyed by it
PROMPT_VERSION = 1
#: passages are cut to this many characters (at a space) before grading; questions to MAX_QUESTION_CHARS
MAX_PASSAGE_CHARS = 2000
MAX_QUESTION_CHARS = 500

SYSTEM_PROMPT = (
    "You are a search quality rater. You judge how relevant a passage is to a user's question, on an integer scale "
    "from 0 to 3:\n"
    "0 = the passage has nothing to do with the question.\n"
    "1 = the passage seems related to the question but does not answer it.\n"
    "2 = the passage has some answer for the question, but the answer may be a bit unclear, or hidden among "
    "extraneous information.\n"
    "3 = the passage is dedicated to the question and contains the exact answer.\n"
    "Give 1 when the passage is about the topic but not about what is asked, 2 when it answers the question and "
    "also says other things, 3 when it is entirely about the question and answers it. If none of these fits, "
    "give 0. Judge only from the passage; do not use what you know otherwise.")
USER_TEMPLATE = ("Question: {question}\n\nPassage: {passage}\n\n"
                 "Consider what the user wants to know, how well the passage matches it and whether it answers it. "
                 'Reply with JSON only: {{"grade": N}} with N one of 0, 1, 2, 3.')
GRADE_SCHEMA = {"type": "object", "properties": {"grade": {"type": "integer", "enum": [0, 1, 2, 3]}},
                "required": ["grade"], "additionalProperties": False}
RESPONSE_FORMAT = {"type": "json_schema", "json_schema": {"name": "relevance_grade", "strict": True,
                                                          "schema": GRADE_SCHEMA}}
#: tokens a reply may take: ``{"grade": 3}`` is about 6; room for an endpoint's whitespace (a retry gets twice this)
MAX_REPLY_TOKENS = 32
#: llama.cpp GBNF: the only text a local server may reply (no whitespace padding)
GRADE_GRAMMAR = 'root ::= "{\\"grade\\": " [0-3] "}"'


class AssessorError(RagbenchError):
    """The assessor could not grade: a reply that is not a grade, or no model to grade with."""


def _cut(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    space = text.rfind(" ", 0, limit)
    return text[:space if space > limit // 2 else limit] + " …"


def messages(question: str, passage: str) -> list[dict[str, str]]:
    """The chat messages that ask for one grade (question and passage cut to their limits, whitespace folded)."""
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": USER_TEMPLATE.format(question=_cut(question, MAX_QUESTION_CHARS),
                                                             passage=_cut(passage, MAX_PASSAGE_CHARS))}]


def parse_grade(text: str) -> int:
    """The grade of a reply ``{"grade": N}`` (N in 0-3); :class:`AssessorError` naming the reply otherwise."""
    try:
        value = json.loads(text)
        grade = value["grade"]
    except (ValueError, TypeError, KeyError):
        raise AssessorError(f"the assessor's reply is not {{\"grade\": N}}: {text[:200]!r} (does the endpoint "
                            "honour response_format json_schema?)") from None
    if isinstance(grade, bool) or not isinstance(grade, int) or grade not in (0, 1, 2, 3):
        raise AssessorError(f"the assessor's reply has grade {grade!r}, not one of 0, 1, 2, 3: {text[:200]!r}")
    return grade


@dataclass(frozen=True)
class Grade:
    """One graded pair: the ``grade`` (0-3; None: ungraded, two replies were not a grade), whether it came from the
    cache, and the ``seconds`` the model took when it was graded (a cached grade keeps the time it first took)."""

    grade: int | None
    cached: bool
    seconds: float

    @property
    def ungraded(self) -> bool:
        return self.grade is None


class GradeCache(BlobCache):
    """Grades under ``root/assessor/<key[:2]>/<key>.<sha256>.json`` (``{"grade": N, "seconds": s}``), keyed by
    :meth:`key`; a damaged entry (bytes changed, not JSON, a grade outside 0-3) is quarantined and graded again."""

    folder, suffix = "assessor", "json"

    @staticmethod
    def key(model: str, question: str, passage: str, prompt_version: int = PROMPT_VERSION) -> str:
        """The entry of one pair under one model identity and prompt version."""
        return stable_hash({"model": model, "prompt_version": prompt_version, "question": question,
                            "passage": passage}, length=32)

    def decode(self, data: bytes) -> dict:
        try:
            value = json.loads(data.decode("utf-8"))
            grade, seconds = value["grade"], float(value.get("seconds") or 0.0)
        except (UnicodeDecodeError, ValueError, TypeError, KeyError, AttributeError) as e:
            raise DamagedEntry(f"not a grade: {e}") from None
        if isinstance(grade, bool) or grade not in (0, 1, 2, 3):
            raise DamagedEntry(f"grade {grade!r} is not one of 0-3")
        return {"grade": int(grade), "seconds": seconds}

    def put(self, key: str, grade: int, seconds: float) -> Path:
        return self.put_bytes(key, json.dumps({"grade": grade, "seconds": round(seconds, 4)}).encode())


class Assessor:
    """Grades pairs with one model: from the :class:`GradeCache` first, else through a chat client that
    ``connect()`` opens on the first pair not cached (so a fully cached rerun starts no server).

    Parameters
    ----------
    model : the model identity grades are keyed and stored by (``assessor:<model>`` in a pool row's source).
    connect : returns ``(client, close)``: a :class:`ragbench.generation.llm.client.ChatClient` and what to call
        when done (stops a local server).
    cache : where grades are kept; None grades everything again.
    max_tokens : the room a reply gets (a retry gets twice as much).
    """

    def __init__(self, model: str, connect: Callable[[], tuple[object, Callable[[], None]]],
                 cache: GradeCache | None, max_tokens: int = MAX_REPLY_TOKENS):
        self.model, self._connect, self.cache, self.max_tokens = model, connect, cache, max_tokens
        self._client = None
        self._close: Callable[[], None] | None = None
        self.graded = 0  # pairs sent to the model (cache misses)
        self.ungraded = 0  # of those, pairs whose two replies were not a grade

    def __enter__(self) -> Assessor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        close, self._close, self._client = self._close, None, None
        if close is not None:
            close()

    @property
    def source(self) -> str:
        """What a pool row's ``source`` says of a grade of this assessor."""
        return f"assessor:{self.model}"

    def grade(self, question: str, passage: str) -> Grade:
        """The grade of one pair (from the cache when there)."""
        key = GradeCache.key(self.model, question, passage)
        hit = self.cache.get(key) if self.cache is not None else None
        if hit is not None:
            return Grade(hit["grade"], True, hit["seconds"])
        if self._client is None:
            self._client, self._close = self._connect()
        t0 = time.perf_counter()
        self.graded += 1
        grade = None
        for room in (self.max_tokens, 2 * self.max_tokens):  # a bad reply is asked again once, with more room
            reply = self._client.complete(messages(question, passage), max_tokens=room)
            try:
                grade = parse_grade(reply.text)
                break
            except AssessorError as e:
                bad = str(e)
        seconds = time.perf_counter() - t0
        if grade is None:
            self.ungraded += 1
            log.warning("assessor: pair left ungraded, twice no grade (%s): %s", _cut(question, 80), bad)
            return Grade(None, False, seconds)
        if self.cache is not None:
            self.cache.put(key, grade, seconds)
        return Grade(grade, False, seconds)

    def grade_all(self, pairs: Sequence[tuple[str, str]], advance: Callable[[int], object] | None = None
                  ) -> list[Grade]:
        """Grades of ``(question, passage)`` pairs, in order; ``advance(1)`` after each."""
        out = []
        for question, passage in pairs:
            out.append(self.grade(question, passage))
            if advance is not None:
                advance(1)
        return out


@dataclass(frozen=True)
class AssessorChoice:
    """Which model grades: a packaged model name or ``.gguf`` path served by a local ``llama-server`` (``model``;
    None: ``$RAGBENCH_LLM_MODEL``, else SmolLM2), or an OpenAI-compatible ``endpoint`` with its ``model`` name
    (its API key in ``$RAGBENCH_LLM_API_KEY``); ``threads`` of the local server."""

    model: str | None = None
    endpoint: str | None = None
    threads: int = 2
    timeout: float = 120.0
    max_tokens: int = MAX_REPLY_TOKENS


def open_assessor(settings, choice: AssessorChoice) -> Assessor:
    """An :class:`Assessor` for ``choice`` with its cache under ``settings.home``; the local server (or the
    endpoint's client) is started only when a pair is not cached, and stopped by :meth:`Assessor.close`."""
    from ragbench.generation.llm.client import ChatClient, ChatOptions

    def options(local: bool) -> ChatOptions:  # cache_prompt and grammar are llama.cpp's (hosted APIs refuse them)
        extra = {"cache_prompt": False, "grammar": GRADE_GRAMMAR} if local else {"response_format": RESPONSE_FORMAT}
        return ChatOptions(temperature=0.0, max_tokens=choice.max_tokens, timeout=choice.timeout, extra_body=extra)

    cache = GradeCache(Path(settings.home) / "cache")
    if choice.endpoint:
        if not choice.model:
            raise AssessorError(f"--endpoint {choice.endpoint}: name the endpoint's model with --model")

        def connect_endpoint():
            client = ChatClient(choice.endpoint, choice.model, options(False),
                                api_key=settings.secret("RAGBENCH_LLM_API_KEY"))
            return client, client.close

        return Assessor(choice.model, connect_endpoint, cache, choice.max_tokens)

    from ragbench.generation.llm.server import (LocalLLMServer, ServerOptions, locate_llama_server, locate_model,
                                                model_identity)

    weights = locate_model(settings, choice.model)
    binary = locate_llama_server(settings)

    def connect_local():
        server = LocalLLMServer(binary, weights, ServerOptions(ctx=4096, threads=choice.threads)).start()
        log.info("assessor: llama-server pid %s serving %s", server.pid, server.model_id)
        client = ChatClient(server.base_url, server.model_id, options(True))

        def close():
            client.close()
            server.stop()

        return client, close

    return Assessor(model_identity(weights), connect_local, cache, choice.max_tokens)
