"""A folder of real files as a dataset (``format: folder``): every file is a document, questions in one file.

Layout: any tree of ``.md``, ``.txt``, ``.html``, ``.pdf`` and ``.docx`` files (see :mod:`.convert`) plus a
questions file (see :mod:`.questions`; default ``questions.csv``/``.jsonl``/``.yaml`` at the root)::

    my-docs/
      questions.csv
      guides/install.md
      reference/errors.html
      release-notes/2024-05.pdf

* Doc id = the path relative to the root (``guides/install.md``); title = an HTML page's first ``<h1>``, else
  its ``<title>``; else the first heading, else the title the file stores (a PDF's Title), else the file name
  without its suffix.
* Metadata (for the metadata filters of retrievers): ``path``, ``folder`` (``"guides"``, ``""`` at the root),
  ``folders`` (every folder on the way, a list: ``{folders: guides}`` matches any depth), ``ext`` (``"md"``),
  ``size`` (bytes) and ``modified`` (ISO-8601 UTC).
* Hidden files and folders (``.name``), Office lock files (``~$name``) and questions files are never documents;
  ``include`` / ``exclude`` globs choose among the rest.
* A file that cannot be read (an encrypted or broken PDF, non-UTF-8 text, a file that converts to empty text, an
  unsupported type) is skipped with a warning naming it and counted; it never stops the load.

**Boilerplate out** (the ``convert`` option, :class:`~ragbench.data.convert.ConvertOptions`): link lists and link
targets go at conversion (:func:`~ragbench.data.convert.clean_links`), then a block (not a heading, not code) found
in at least ``drop_repeated`` of the documents of a folder of at least :data:`MIN_DOCUMENTS` is dropped from every
one (footers, navigation, legal lines; numbers count as equal, so ``Last updated 2024-05-01`` repeats).
:meth:`FolderScan.boilerplate` says what was dropped and how often; a quote found only in dropped text is reported
as such. ``convert: false`` keeps everything (the text and fingerprint of before).

**Incremental.** Converted text is cached by the file's content hash and the converter's version
(:class:`~ragbench.core.cache.DocumentCache` under ``<home>/cache/converted``), so a rerun on a folder where a few
files changed converts only those; chunk ids hash ``(doc id, offsets)`` and vectors are cached by text, so only the
changed documents' chunks are embedded again.

The fingerprint hashes the corpus table (ids, titles, converted text, metadata), the questions file and the spec
settings, not where the folder lives: a folder whose cleaned text differs gets a new fingerprint through its text;
the ``convert`` option itself enters only when not at its default (a folder with nothing to drop keeps its
fingerprint).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar, Literal

import polars as pl
from pydantic import Field, field_validator

from ragbench.core import bounded_io
from ragbench.core.cache import DocumentCache
from ragbench.core.errors import DatasetError
from ragbench.core.hashing import file_sha256, stable_hash
from ragbench.core.progress import log, progress
from ragbench.core.schemas import CORPUS_SCHEMA
from ragbench.data.convert import (KINDS, ConversionError, ConvertOptions, blocks, clean_links, cleaning_id, convert,
                                   converter_id, first_heading, is_structure, strip_link_targets)
from ragbench.data.dataset import Dataset, subset
from ragbench.data.judged import judgments_path, with_judgments
from ragbench.data.questions import SUFFIXES as QUESTION_SUFFIXES
from ragbench.data.labels import label_questions
from ragbench.data.questions import find_questions_file, read_questions
from ragbench.data.spec import DATASET_FORMATS, DatasetSpec, DetailTable


@dataclass(frozen=True)
class FolderDocument:
    """One file read as a document."""

    doc_id: str
    kind: str
    title: str
    text: str
    metadata: dict
    sha256: str
    cached: bool  # the converted text came from the cache
    dropped: tuple[tuple[str, str], ...] = ()  # (why, block) of each boilerplate block left out of text
    title_stored: str | None = None  # the title the file stores apart from its text (a PDF's Title)

    def dropped_text(self) -> str:
        """The blocks left out of :attr:`text`, one after another (where a quote of boilerplate is found)."""
        return "\n\n".join(block for _, block in self.dropped)


@dataclass(frozen=True)
class SkippedFile:
    """A file that is not a document, and why."""

    doc_id: str
    suffix: str
    reason: str
    line: int | None = None
    unsupported: bool = False


@dataclass(frozen=True)
class FolderScan:
    """What a folder holds: its documents and the files skipped."""

    root: Path
    documents: tuple[FolderDocument, ...]
    skipped: tuple[SkippedFile, ...]

    def boilerplate(self) -> list[str]:
        """What conversion left out, one line per kind: ``3 repeated blocks dropped from 111 pages: 'Last updated
        …' (111 pages), …`` (most frequent first, then by text), the same for link lists; empty when nothing was dropped."""
        out = []
        for why, noun in (("repeated", "repeated block"), ("link list", "link list")):
            pages: Counter[str] = Counter()
            shown: dict[str, str] = {}
            for d in self.documents:
                for key in {_block_key(b) for w, b in d.dropped if w == why}:
                    pages[key] += 1
                    shown.setdefault(key, next(b for w, b in d.dropped if w == why and _block_key(b) == key))
            if pages:
                n_docs = sum(any(w == why for w, _ in d.dropped) for d in self.documents)
                top = ", ".join(f"{_short(strip_link_targets(shown[k]))!r} ({n} page{'s' * (n != 1)})"
                                for k, n in sorted(pages.items(), key=lambda kn: (-kn[1], kn[0]))[:3])
                more = f", and {len(pages) - 3} more" if len(pages) > 3 else ""
                out.append(f"{len(pages)} {noun}{'s' * (len(pages) != 1)} dropped from {n_docs} "
                           f"page{'s' * (n_docs != 1)}: {top}{more}")
        if out:
            out.append("(the dataset option convert: false keeps them)")
        return out

    @property
    def n_converted(self) -> int:
        """Documents converted in this scan (not from the cache)."""
        return sum(not d.cached for d in self.documents)

    def by_type(self) -> dict[str, dict[str, int]]:
        """``suffix -> {"files", "documents", "skipped"}``, suffixes sorted."""
        out: dict[str, dict[str, int]] = {}
        for d in self.documents:
            s = out.setdefault("." + d.metadata["ext"], {"files": 0, "documents": 0, "skipped": 0})
            s["files"] += 1
            s["documents"] += 1
        for f in self.skipped:
            s = out.setdefault(f.suffix or "(none)", {"files": 0, "documents": 0, "skipped": 0})
            s["files"] += 1
            s["skipped"] += 1
        return dict(sorted(out.items()))

    def warnings(self) -> list[str]:
        """One line per skipped file (``file[:line]: skipped: reason``); unsupported types summed up in one."""
        root = printable_name(str(self.root))
        out = [f"{printable_name(str(self.root / f.doc_id))}{f':{f.line}' if f.line else ''}: skipped: {f.reason}"
               for f in self.skipped if not f.unsupported]
        other = Counter(f.suffix or "(no suffix)" for f in self.skipped if f.unsupported)
        if other:
            out.append(f"{root}: {sum(other.values())} file(s) of unsupported types skipped ("
                       + ", ".join(f"{s}: {n}" for s, n in sorted(other.items()))
                       + f"); supported: {', '.join(sorted(KINDS))}; list them under exclude to silence this")
        return out


def _matches(rel: str, patterns: tuple[str, ...]) -> bool:
    name = rel.rsplit("/", 1)[-1]
    for p in patterns:
        p = p.strip().removeprefix("./")
        if p.endswith("/"):
            p += "**"
        target = rel if "/" in p else name
        if fnmatch.fnmatchcase(target, p) or fnmatch.fnmatchcase(target, p.replace("**/", "")):
            return True
    return False


def list_files(root: Path, include: tuple[str, ...] = (), exclude: tuple[str, ...] = (),
               questions: Path | None = None) -> list[str]:
    """The root-relative POSIX paths of the candidate documents under ``root``, sorted.

    A pattern without ``/`` matches file names (``*.pdf``), one with ``/`` matches the path (``drafts/**``;
    ``*`` crosses folders); hidden files and folders, Office lock files, ``questions`` and the default questions
    files at the root (``questions.csv`` ..., ``questions.synthetic.csv`` ...) are left out.
    """
    root = Path(root)
    skip = {(root / f"questions{kind}{s}").resolve() for s in QUESTION_SUFFIXES for kind in ("", ".synthetic")}
    skip.add((root / "judgments.csv").resolve())  # the added judgments are labels, not a document
    if questions is not None:
        skip.add(Path(questions).resolve())
        skip.add((Path(questions).parent / "judgments.csv").resolve())
    out = []
    for path in root.rglob("*"):
        rel = path.relative_to(root).as_posix()
        if any(part.startswith(".") for part in rel.split("/")) or path.name.startswith("~$"):
            continue
        if not path.is_file() or path.resolve() in skip:
            continue
        if include and not _matches(rel, include):
            continue
        if exclude and _matches(rel, exclude):
            continue
        out.append(rel)
    return sorted(out)


def _metadata(doc_id: str, path: Path) -> dict:
    st = path.stat()
    parent = PurePosixPath(doc_id).parent
    folders = list(parent.parts) if str(parent) != "." else []
    return {"path": doc_id, "folder": "/".join(folders), "folders": folders,
            "ext": path.suffix.lower().lstrip("."), "size": st.st_size,
            "modified": datetime.fromtimestamp(st.st_mtime, timezone.utc).isoformat(timespec="seconds")}


def printable_name(name: str) -> str:
    """``name`` as valid Unicode, so that it can be printed, hashed and stored anywhere: a file name whose bytes are
    not UTF-8 (which Python holds as surrogate escapes, ``'caf\\udcff.md'``) gets each such byte written as
    ``\\xNN`` (``'caf\\\\xff.md'``, shown as ``caf\\xff.md``); any other name is returned as it is."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        pass
    try:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that is no escaped byte
        return name.encode("utf-8", "backslashreplace").decode("utf-8")


#: a folder needs at least this many documents before a block repeated across them is dropped as boilerplate
MIN_DOCUMENTS = 10
#: converter kinds whose text has Markdown links and blocks to clean (plain text and PDF text have none)
_CLEANED_KINDS = ("markdown", "html", "docx")


def _block_key(block: str) -> str:
    """A block as compared across documents: spacing, letter case and numbers (dates, versions) do not count."""
    return re.sub(r"\d+", "0", " ".join(block.split())).casefold()


def _short(block: str, n: int = 48) -> str:
    one = " ".join(block.split())
    return one if len(one) <= n else one[: n - 1] + "…"


def drop_repeated(docs: list[FolderDocument], share: float) -> list[FolderDocument]:
    """``docs`` with every block (not a heading, not code) that occurs in at least ``share`` of them dropped, when
    there are at least :data:`MIN_DOCUMENTS` (``share`` 0: none dropped). A document that would be left empty keeps
    its text."""
    if share <= 0 or len(docs) < MIN_DOCUMENTS:
        return docs
    split = [blocks(d.text) for d in docs]
    seen = Counter(k for bs in split for k in {_block_key(b) for b in bs if not is_structure(b)})
    threshold = max(2, share * len(docs))
    repeated = {k for k, n in seen.items() if n >= threshold}
    if not repeated:
        return docs
    out = []
    for d, bs in zip(docs, split):
        gone = [b for b in bs if not is_structure(b) and _block_key(b) in repeated]
        kept = [b for b in bs if is_structure(b) or _block_key(b) not in repeated]
        if not gone or not kept:
            out.append(d)
            continue
        text = "\n\n".join(kept) + "\n"
        out.append(replace(d, text=text, title=_title(text, d.title_stored, d.doc_id, d.kind),
                           dropped=d.dropped + tuple(("repeated", b) for b in gone)))
    return out


def _title(text: str, stored: str | None, doc_id: str, kind: str = "") -> str:
    """An HTML page's own title (its first ``<h1>``, else ``<title>``: :func:`~ragbench.data.convert.convert`),
    else the text's first heading, else the title the file stores (a PDF's Title), else the file name's stem."""
    if kind == "html" and stored:
        return stored
    return first_heading(text) or stored or PurePosixPath(doc_id).stem


def _read_file(root: Path, rel: str, cache: DocumentCache | None,
               options: ConvertOptions | None = None) -> FolderDocument | SkippedFile:
    """One candidate file as a document, or why it is skipped. ``rel`` is the name on disk; the doc id is its
    :func:`printable_name`; ``options``: what conversion leaves out (None: nothing)."""
    path, doc_id = root / rel, printable_name(rel)
    suffix = printable_name(path.suffix.lower())
    kind = KINDS.get(suffix)
    if kind is None:
        return SkippedFile(doc_id, suffix, f"unsupported type {suffix or '(no suffix)'}", unsupported=True)
    try:
        size, limit = path.stat().st_size, bounded_io.MAX_DOCUMENT_BYTES
        if size > limit:
            return SkippedFile(doc_id, suffix, f"{size:,} bytes, larger than a document may be ({limit:,})")
        data = path.read_bytes()
    except OSError as e:
        return SkippedFile(doc_id, suffix, f"cannot read it ({e.strerror or e})")
    sha = hashlib.sha256(data).hexdigest()
    options = options if kind in _CLEANED_KINDS else None
    key = DocumentCache.key(sha, converter_id(kind) + cleaning_id(options))
    entry = cache.get(key) if cache is not None else None
    cached = entry is not None
    if entry is None:
        try:
            text, title = convert(data, kind, options)
            entry = {"text": text, "title": title}
            if options is not None and options.per_file:
                text, dropped = clean_links(text, options)
                entry = {"text": text, "title": title, "dropped": dropped}
        except ConversionError as e:
            entry = {"error": str(e), "line": e.line}
        if cache is not None:
            cache.put(key, entry)
    if "error" in entry:
        return SkippedFile(doc_id, suffix, entry["error"], entry.get("line"))
    text = entry["text"]
    title = _title(text, entry.get("title"), doc_id, kind)
    return FolderDocument(doc_id, kind, title, text, _metadata(doc_id, path), sha, cached,
                          tuple(("link list", b) for b in entry.get("dropped", ())), entry.get("title"))


def scan_folder(root: Path, include: tuple[str, ...] = (), exclude: tuple[str, ...] = (), *,
                cache_root: Path | None = None, questions: Path | None = None,
                convert: ConvertOptions | None = None) -> FolderScan:
    """Read every file under ``root`` (see :func:`list_files`) as a document, converting what needs it and leaving
    boilerplate out as ``convert`` says (None: the defaults of :class:`~ragbench.data.convert.ConvertOptions`).

    With ``cache_root``, converted text (and conversion failures) come from / go to the
    :class:`~ragbench.core.cache.DocumentCache` there, keyed by file content and converter version. A file whose
    name is not UTF-8 is read under its :func:`printable_name` (its doc id, title and metadata); one whose printable
    name is already another file's doc id is skipped with a warning.
    """
    root = Path(root)
    if not root.is_dir():
        raise DatasetError(f"{printable_name(str(root))}: folder not found")
    cache = DocumentCache(cache_root) if cache_root is not None else None
    options = convert if convert is not None else ConvertOptions()
    files = list_files(root, include, exclude, questions)
    docs: list[FolderDocument] = []
    skipped: list[SkippedFile] = []
    taken = set(files)
    with progress(f"read {printable_name(root.name)}", len(files)) as advance:
        for rel in files:
            doc_id = printable_name(rel)
            if doc_id != rel and doc_id in taken:  # a real file already has that name
                skipped.append(SkippedFile(doc_id, printable_name(Path(rel).suffix.lower()),
                                           "its name is not UTF-8 and, written printably, is another file's name"))
            else:
                got = _read_file(root, rel, cache, options)
                (docs if isinstance(got, FolderDocument) else skipped).append(got)
            advance(1)
    scan = FolderScan(root, tuple(drop_repeated(docs, options.drop_repeated)), tuple(skipped))
    fresh = [d.doc_id for d in docs if not d.cached]
    shown = printable_name(str(root))
    if cache is not None and 0 < len(fresh) < len(docs) and len(fresh) <= 10:  # a rerun: name what changed
        log.info("folder %s: converted (new or changed): %s", shown, ", ".join(fresh))
    log.info("folder %s: %d files: %d documents (%d converted, %d from the conversion cache), %d skipped", shown,
             len(files), len(docs), scan.n_converted, len(docs) - scan.n_converted, len(skipped))
    return scan


def questions_path(spec: DatasetSpec) -> Path | None:
    """The questions file of a folder spec: ``questions`` (relative to the folder) or the default one, if any."""
    root = Path(spec.path)
    if spec.questions is not None:
        q = Path(spec.questions)
        return q if q.is_absolute() else root / q
    return find_questions_file(root)


def corpus_table(scan: FolderScan) -> pl.DataFrame:
    """The corpus table (:data:`~ragbench.core.schemas.CORPUS_SCHEMA`) of a scan, sorted by doc id."""
    return pl.DataFrame([(d.doc_id, d.title, d.text, json.dumps(d.metadata, sort_keys=True))
                         for d in scan.documents], schema=CORPUS_SCHEMA, orient="row")


def _corpus_hash(corpus: pl.DataFrame) -> str:
    h = hashlib.sha256()
    for row in corpus.iter_rows():
        h.update(json.dumps(row, ensure_ascii=False).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def load_folder(spec: DatasetSpec, *, cache_root: Path | None = None) -> Dataset:
    """Load a folder of files and its questions file (see the module docstring); ``cache_root`` holds converted
    documents. Every file problem is a counted warning; every questions problem an error, all listed at once."""
    return folder_dataset(spec, cache_root)[0]


def folder_dataset(spec: DatasetSpec, cache_root: Path | None = None) -> tuple[Dataset, FolderScan]:
    """:func:`load_folder` that also returns the scan (files by type, what was skipped), for ``datasets``."""
    root = Path(spec.path)
    if not root.is_dir():
        raise DatasetError(f"{root}: dataset folder not found")
    qpath = questions_path(spec)
    if qpath is None:
        raise DatasetError(f"{root}: no questions file (questions.csv, .jsonl or .yaml); `ragbench datasets init "
                           f"{root}` writes a template")
    if not qpath.is_file():
        raise DatasetError(f"{qpath}: questions file not found")
    rows, problems = read_questions(qpath)  # before converting anything: a broken file fails fast
    scan = scan_folder(root, spec.include, spec.exclude, cache_root=cache_root, questions=qpath,
                       convert=spec.convert)
    if not scan.documents:
        raise DatasetError(f"{root}: no documents" + (f" ({len(scan.skipped)} file(s) skipped: "
                                                      f"{'; '.join(scan.warnings()[:3])})" if scan.skipped else ""))
    corpus = corpus_table(scan)
    labels = label_questions(qpath, rows, dict(zip(corpus["doc_id"], corpus["text"])),
                             {f.doc_id: f.reason for f in scan.skipped}, problems,
                             dropped={d.doc_id: d.dropped_text() for d in scan.documents if d.dropped})
    queries, spans = labels.queries, labels.spans
    if "queries" in spec.model_fields_set and spec.queries == "in_qrels":
        queries = queries.filter(pl.col("query_id").is_in(labels.qrels["query_id"].unique().implode()))
        spans = spans.filter(pl.col("query_id").is_in(queries["query_id"].implode()))
    if not spec.spans:
        spans = spans.clear()
    fingerprint = stable_hash({"corpus": _corpus_hash(corpus), "questions": file_sha256(qpath),
                               "spec": spec.model_dump(mode="json", exclude={"name", "path", "questions",
                                                                             "holdout", "labels"})})
    ds = Dataset(spec.name or printable_name(root.name), corpus, queries, labels.qrels, spans, fingerprint,
                 tuple(scan.warnings()) + labels.warnings, notes=labels.notes)
    ds = subset(ds, spec.max_queries, spec.max_docs, spec.seed)  # judgments after: the corpus stays the same
    return with_judgments(ds, judgments_path(root, "folder", questions=qpath), spec.labels), scan


@DATASET_FORMATS.register
class FolderDataset(DatasetSpec):
    """``format: folder``: a folder of documents (Markdown, text, HTML, PDF, DOCX), converted to Markdown and
    cached, and a questions file (CSV, JSONL or YAML) whose quotes label evidence spans in them."""

    dumped_when_set: ClassVar[tuple[str, ...]] = DatasetSpec.dumped_when_set + ("convert",)

    format: Literal["folder"] = "folder"
    questions: Path | None = Field(None, description="folder format: the questions file (CSV, JSONL or YAML), "
                                   "relative to path (in a sweep file: to the sweep file; on the command "
                                   "line: to the working directory); default: questions.csv/.jsonl/.yaml in the "
                                   "folder, if any")
    include: tuple[str, ...] = Field((), description="folder format: glob patterns of the files to read (a pattern "
                                     "without '/' matches file names, one with '/' the path); default: every file")
    exclude: tuple[str, ...] = Field((), description="folder format: glob patterns of files to leave out (hidden "
                                     "files and the questions file always are)")

    convert: bool | ConvertOptions = Field(
        ConvertOptions(), description="folder format: boilerplate left out at conversion (repeated "
        "blocks, link lists, link targets, drop_selectors), e.g. {drop_repeated: 0.3, drop_link_lists: true, "
        "drop_selectors: ['#footer']}; false keeps everything")

    @field_validator("convert", mode="before")
    @classmethod
    def _convert_options(cls, v: Any) -> Any:
        """``true`` = the default cleaning, ``false`` = none (:meth:`ConvertOptions.off`)."""
        if isinstance(v, bool):
            return ConvertOptions() if v else ConvertOptions.off()
        return v

    @classmethod
    def recognizes(cls, path: Path) -> int:
        return 1 if path.is_dir() else 0  # any folder (a BEIR folder recognizes itself more surely)

    def load(self, cache_root: Path | None = None) -> Dataset:
        return load_folder(self, cache_root=cache_root)

    def load_with_details(self, cache_root: Path | None = None) -> tuple[Dataset, tuple[DetailTable, ...]]:
        """The dataset and the folder's files by type (files, documents made, files skipped)."""
        ds, scan = folder_dataset(self, cache_root)
        rows = tuple((suffix, str(n["files"]), str(n["documents"]), str(n["skipped"]))
                     for suffix, n in scan.by_type().items())
        title = f"files in {printable_name(str(scan.root))}"
        tables = [DetailTable(title, ("type", "files", "documents", "skipped"), rows)]
        if lines := scan.boilerplate():
            tables.append(DetailTable("boilerplate left out at conversion", ("dropped",),
                                      tuple((line,) for line in lines)))
        return ds, tuple(tables)
