"""Files -> Markdown text, one converter per file type, with maintained libraries doing the parsing.

* ``.md``, ``.markdown``, ``.txt``: the text as it is (UTF-8; a BOM is dropped, CRLF becomes LF).
* ``.html``, ``.htm``: BeautifulSoup drops scripts, styles, ``<head>``, ``<nav>``, ``role="navigation"``
  elements and ``<footer>`` (site chrome, not the page's text) and Sphinx's permalink marks (``a.headerlink``,
  the ``¶`` after each heading); markdownify writes ATX headings, ``-``
  bullets, fenced code and pipe tables, without escaping ``_``/``*`` (the text stays searchable as written). The
  title is the page's first ``<h1>`` (its text, without the permalink mark), else its ``<title>``: a Sphinx page's
  first heading is often its top bar's ``<h3>Navigation</h3>``.
* ``.docx``: mammoth maps Word styles to HTML (Heading 1 -> ``<h1>`` ...), then the HTML path above.
* ``.pdf``: pypdf's text layer, page by page (a PDF has no heading structure to keep; its Title, when set, is the
  document's title). An encrypted PDF is opened when its user password is empty, else skipped.

A file that cannot be converted raises :class:`ConversionError` with a one-line reason; the folder loader skips it
with a counted warning. :data:`CONVERTER_VERSION` and the libraries' versions are part of the conversion cache key,
so upgrading either converts again.

**Boilerplate out** (:class:`ConvertOptions`, the folder format's ``convert`` option; per file, here): elements
matching ``drop_selectors`` (CSS selectors, HTML and Word only) are removed, link lists (a block of at least two
links whose text is mostly link text: a table of contents, a navigation bar) are dropped, and link targets leave
the text (``[merge](#def_merge)`` -> ``merge``; an image keeps its alt text). Blocks repeated across the folder's
documents are dropped by the folder loader (:mod:`.folder`), which sees them all. The options are part of the
conversion cache key (:func:`cleaning_id`); with every cleaning off the key and the text are those of before.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from functools import cache
from importlib.metadata import PackageNotFoundError, version

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ragbench.core.hashing import stable_hash

#: bump when the conversion below changes its output
CONVERTER_VERSION = 2  # 2: HTML navigation (role) and Sphinx permalinks out; title from <h1> or <title>

#: file suffix -> converter kind
KINDS = {".md": "markdown", ".markdown": "markdown", ".txt": "text", ".html": "html", ".htm": "html",
         ".pdf": "pdf", ".docx": "docx"}
_LIBRARIES = {"markdown": (), "text": (), "html": ("beautifulsoup4", "markdownify"),
              "docx": ("mammoth", "beautifulsoup4", "markdownify"), "pdf": ("pypdf",)}
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^(```|~~~)")
#: bump when the per-file cleaning below (link lists, link targets, selectors) changes its output
CLEANING_VERSION = 4  # 2: text across lines, link-only sections, chrome link lists; 3: quotes in link titles;
# 4: a heading empty in the page itself is kept
#: a Markdown link or image (target with an optional title), or an inline code span (left as it is)
#: (link text may span lines, not a blank one, and hold one level of brackets: ``[a_tuple[i] += 1](#id51)``)
_LINK = re.compile(r"(`+)[^`]*?\1|(!?)\[((?:[^\[\]\n]|\n(?![ \t]*\n)|\[[^\[\]\n]*\])*)\]"
                   r"\((?:[^()\s]|\([^()\s]*\))*(?:\s+\"(?:[^\"\\]|\\.)*\")?\)")
#: site chrome that is dropped (with ``drop_link_lists``) when it is a link list: Sphinx's bars and sidebar
CHROME_SELECTORS = ("div.related", "div.sphinxsidebar")
#: share of a block's word characters in link text from which a block of links is a link list
LINK_LIST_SHARE = 0.7


class ConvertOptions(BaseModel):
    """What conversion leaves out of a folder's text (the folder format's ``convert`` option; ``false`` turns every
    cleaning off: the text converted as before these options existed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    drop_repeated: float = Field(0.3, ge=0, le=1, description="drop a block found in at least this share of the "
                                 "documents (in a folder of at least 10; headings and code are never dropped); 0: off")
    drop_link_lists: bool = Field(True, description="drop blocks that are mostly link text (tables of contents, "
                                  "navigation)")
    strip_link_targets: bool = Field(True, description="keep a link's text, not its target")
    drop_selectors: tuple[str, ...] = Field((), description="CSS selectors of HTML elements to remove (#footer)")

    @field_validator("drop_selectors")
    @classmethod
    def _css(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        import soupsieve

        for selector in v:
            try:
                soupsieve.compile(selector)
            except soupsieve.SelectorSyntaxError as e:
                raise ValueError(f"{selector!r} is not a CSS selector ({str(e).splitlines()[0]})") from None
        return v

    @classmethod
    def off(cls) -> "ConvertOptions":
        """Every cleaning off (``convert: false``)."""
        return cls(drop_repeated=0, drop_link_lists=False, strip_link_targets=False)

    @property
    def per_file(self) -> dict:
        """The options that change one file's conversion (the cache key's part); empty when all are off."""
        on = {"link_lists": self.drop_link_lists, "link_targets": self.strip_link_targets,
              "selectors": list(self.drop_selectors)}
        return {k: v for k, v in on.items() if v}


def cleaning_id(options: ConvertOptions | None) -> str:
    """The conversion cache key's part for ``options``: ``""`` when no per-file cleaning is on (so the key is the
    one made before cleaning existed), else the cleaning version and a hash of the options."""
    part = options.per_file if options is not None else {}
    return f";clean-v{CLEANING_VERSION}:{stable_hash(part, length=12)}" if part else ""


class ConversionError(Exception):
    """A file that cannot be turned into text; the message is the reason, one line (``line``: where, if known)."""

    def __init__(self, reason: str, line: int | None = None):
        super().__init__(reason)
        self.line = line


@cache
def converter_id(kind: str) -> str:
    """The identity of the converter of ``kind``: its version and its libraries' versions (a cache-key part)."""
    libs = []
    for lib in _LIBRARIES[kind]:
        try:
            libs.append(f"{lib}=={version(lib)}")
        except PackageNotFoundError:
            libs.append(f"{lib}==?")
    return ";".join([f"{kind}-v{CONVERTER_VERSION}", *libs])


def first_heading(text: str) -> str | None:
    """The text of the first ATX heading outside fenced code, or None."""
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and (m := _HEADING.match(line)):
            return m.group(1).strip()
    return None


def _tidy(text: str) -> str:
    """LF line ends, no trailing spaces, at most one blank line in a row, no blank lines at the ends."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n") + "\n"


def decode_utf8(data: bytes) -> str:
    """UTF-8 text without a BOM; a non-UTF-8 file raises :class:`ConversionError` naming the line and byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ConversionError(f"not UTF-8 text (byte 0x{data[e.start]:02x}); save it as UTF-8", line) from None


def _element_is_link_list(tag) -> bool:
    """An element whose word characters are mostly (:data:`LINK_LIST_SHARE`) in at least two links' text."""
    links = tag.find_all("a")
    inside = sum(_word_chars(a.get_text()) for a in links)
    total = _word_chars(tag.get_text())
    return len(links) >= 2 and inside > 0 and inside >= LINK_LIST_SHARE * total


def _html_to_markdown(html: bytes | str, selectors: tuple[str, ...] = (), chrome: bool = False
                      ) -> tuple[str, str | None]:
    """``(Markdown, title)`` of an HTML page (see the module docstring); ``chrome``: also drop the
    :data:`CHROME_SELECTORS` elements that are link lists."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup.select("a.headerlink"):  # Sphinx's permalink mark, not the heading's text
        tag.decompose()
    page_title = soup.title.get_text(" ", strip=True) if soup.title is not None else ""
    for tag in soup(["script", "style", "noscript", "template", "head", "nav", "footer"]):  # not the page's text
        tag.decompose()
    for tag in soup.select('[role="navigation"]'):
        tag.decompose()
    for selector in selectors:
        for tag in soup.select(selector):
            tag.decompose()
    if chrome:
        for tag in soup.select(", ".join(CHROME_SELECTORS)):
            if not tag.decomposed and _element_is_link_list(tag):
                tag.decompose()
    h1 = soup.find("h1")
    title = " ".join(h1.get_text(" ").split()) if h1 is not None else ""
    converter = MarkdownConverter(heading_style="ATX", bullets="-", escape_underscores=False,
                                  escape_asterisks=False, escape_misc=False)
    return converter.convert_soup(soup.body or soup), title or page_title or None


def _pdf_text(data: bytes) -> tuple[str, str | None]:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")
            except (PdfReadError, DependencyError, NotImplementedError, ValueError) as e:  # an unknown cipher
                raise ConversionError(f"encrypted PDF that cannot be opened ({e})") from None
            if not opened:
                raise ConversionError("encrypted PDF (needs a password); decrypt it or remove it from the folder")
        pages = [page.extract_text() or "" for page in reader.pages]
        title = reader.metadata.title if reader.metadata is not None else None
    except ConversionError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as e:
        raise ConversionError(f"unreadable PDF ({type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''})"
                              ) from None
    title = title.strip() if isinstance(title, str) else None
    return "\n\n".join(p.strip() for p in pages if p.strip()), title or None


def _docx_html(data: bytes) -> str:
    import zipfile

    import mammoth

    try:
        return mammoth.convert_to_html(io.BytesIO(data)).value
    except (zipfile.BadZipFile, KeyError, ValueError) as e:
        raise ConversionError(f"unreadable .docx ({type(e).__name__}: {str(e)[:120]})") from None


def convert(data: bytes, kind: str, options: ConvertOptions | None = None) -> tuple[str, str | None]:
    """``(Markdown text, title)`` of a file's bytes under converter ``kind`` (see :data:`KINDS`); the title is the
    document's own when its format gives one apart from the text (a PDF's Title; an HTML page's first ``<h1>``,
    else its ``<title>``), else None. ``options``: what to
    leave out (selectors here; link lists and targets are :func:`clean_links`' work); None: nothing.

    Raises :class:`ConversionError` when the file cannot be read or converts to empty text.
    """
    title = None
    selectors = options.drop_selectors if options is not None else ()
    chrome = options is not None and options.drop_link_lists
    if kind in ("markdown", "text"):
        text = decode_utf8(data)
    elif kind == "html":
        text, title = _html_to_markdown(data, selectors, chrome)
    elif kind == "docx":
        text, _ = _html_to_markdown(_docx_html(data), selectors, chrome)
    elif kind == "pdf":
        text, title = _pdf_text(data)
    else:
        raise ValueError(f"unknown converter {kind!r}")
    if not text.strip():
        hint = " (a scanned PDF without a text layer?)" if kind == "pdf" else ""
        raise ConversionError(f"converts to empty text{hint}")
    return _tidy(text), title


def blocks(text: str) -> list[str]:
    """The blocks of Markdown ``text``: paragraphs, lists, tables and headings separated by blank lines, each fenced
    code block whole (its blank lines included)."""
    out: list[list[str]] = []
    current: list[str] = []
    fenced = False
    for line in text.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        if not fenced and not line.strip() and not _FENCE.match(line):
            if current:
                out.append(current)
            current = []
            continue
        current.append(line)
    if current:
        out.append(current)
    return ["\n".join(b) for b in out]


def is_structure(block: str) -> bool:
    """A heading or a fenced code block: structure and code, never dropped as boilerplate."""
    return bool(_HEADING.match(block)) or bool(_FENCE.match(block))


def _word_chars(text: str) -> int:
    return len(re.findall(r"\w", text))


def is_link_list(block: str) -> bool:
    """A block of at least two links whose word characters are mostly (:data:`LINK_LIST_SHARE`) link text."""
    links = [m.group(3) for m in _LINK.finditer(block) if m.group(3) is not None and not m.group(2)]
    if len(links) < 2 or is_structure(block):
        return False
    inside = sum(_word_chars(t) for t in links)
    outside = _word_chars(_LINK.sub(lambda m: m.group(0) if m.group(1) else "", block))
    return inside > 0 and inside >= LINK_LIST_SHARE * (inside + outside)


def _unfenced(text: str, change: Callable[[str], str]) -> str:
    """``text`` with ``change`` applied to each stretch of lines outside fenced code (fences kept as they are)."""
    out: list[str] = []
    stretch: list[str] = []
    fenced = False
    for line in text.split("\n"):
        if _FENCE.match(line) or fenced:
            if stretch:
                out.append(change("\n".join(stretch)))
                stretch = []
            out.append(line)
            if _FENCE.match(line):
                fenced = not fenced
        else:
            stretch.append(line)
    if stretch:
        out.append(change("\n".join(stretch)))
    return "\n".join(out)


def strip_link_targets(text: str) -> str:
    """``[text](target)`` -> ``text`` and ``![alt](src)`` -> ``alt`` outside code (inline spans and fences); link
    text may span lines (not a blank one) and sit in a heading."""
    return _unfenced(text, lambda part: _LINK.sub(lambda m: m.group(0) if m.group(1) else m.group(3), part))


def _heading_level(block: str) -> int | None:
    """The level of a one-line ATX heading block, else None."""
    if "\n" in block or not _HEADING.match(block):
        return None
    return len(block) - len(block.lstrip("#"))


def _bare(block: str) -> bool:
    """A block with no words outside links: nothing but links (one is enough), or no word characters at all."""
    if is_structure(block):
        return False
    outside = _word_chars(_LINK.sub(lambda m: m.group(0) if m.group(1) else "", block))
    inside = sum(_word_chars(m.group(3)) for m in _LINK.finditer(block) if m.group(3) is not None)
    return outside == 0 or (inside > 0 and inside >= LINK_LIST_SHARE * (inside + outside))


def _drop_sections(bs: list[str], gone: list[bool]) -> None:
    """Mark in ``gone`` each heading whose section (the blocks up to the next heading of its level or above) holds
    nothing after cleaning but dropped blocks, bare links (:func:`_bare`) and headings marked so, with that section:
    a sidebar's "Next topic" over one link, a "Table of Contents" over its list. A heading with nothing under it in
    the page (``## SYNOPSIS`` right before ``## DESCRIPTION``) is structure, not chrome: it stays, and the markdown
    chunker joins it to the next section."""
    for i in range(len(bs) - 1, -1, -1):
        level = _heading_level(bs[i])
        if level is None:
            continue
        end = i + 1
        while end < len(bs) and ((lv := _heading_level(bs[end])) is None or lv > level):
            end += 1
        section = range(i + 1, end)
        if section and all(gone[j] or (_heading_level(bs[j]) is None and _bare(bs[j])) for j in section):
            for j in range(i, end):
                gone[j] = True


def clean_links(text: str, options: ConvertOptions) -> tuple[str, list[str]]:
    """``(text, dropped blocks)``: link lists dropped, with the headings whose sections held only links (or
    nothing left after that), and link targets stripped, as ``options`` say. A text that would be left empty stays as it is."""
    dropped: list[str] = []
    if options.drop_link_lists:
        bs = blocks(text)
        gone = [is_link_list(b) for b in bs]
        _drop_sections(bs, gone)
        dropped = [b for b, g in zip(bs, gone) if g]
        if dropped and not all(gone):
            text = "\n\n".join(b for b, g in zip(bs, gone) if not g) + "\n"
        else:
            dropped = []
    if options.strip_link_targets:
        text = strip_link_targets(text)
    return text, dropped
