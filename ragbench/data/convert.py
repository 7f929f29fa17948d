"""Files -> Markdown text, one converter per file type, with maintained libraries doing the parsing.

* ``.md``, ``.markdown``, ``.txt``: the text as it is (UTF-8; a BOM is dropped, CRLF becomes LF).
* ``.html``, ``.htm``: BeautifulSoup drops scripts, styles, ``<head>``, ``<nav>`` and ``<footer>`` (site chrome,
  not the page's text); markdownify writes ATX headings, ``-``
  bullets, fenced code and pipe tables, without escaping ``_``/``*`` (the text stays searchable as written).
* ``.docx``: mammoth maps Word styles to HTML (Heading 1 -> ``<h1>`` ...), then the HTML path above.
* ``.pdf``: pypdf's text layer, page by page (a PDF has no heading structure to keep; its Title, when set, is the
  document's title). An encrypted PDF is opened when its user password is empty, else skipped.

A file that cannot be converted raises :class:`ConversionError` with a one-line reason; the folder loader skips it
with a counted warning. :data:`CONVERTER_VERSION` and the libraries' versions are part of the conversion cache key,
so upgrading either converts again.
"""

from __future__ import annotations

import io
import re
from functools import cache
from importlib.metadata import PackageNotFoundError, version

#: bump when the conversion below changes its output
CONVERTER_VERSION = 1

#: file suffix -> converter kind
KINDS = {".md": "markdown", ".markdown": "markdown", ".txt": "text", ".html": "html", ".htm": "html",
         ".pdf": "pdf", ".docx": "docx"}
_LIBRARIES = {"markdown": (), "text": (), "html": ("beautifulsoup4", "markdownify"),
              "docx": ("mammoth", "beautifulsoup4", "markdownify"), "pdf": ("pypdf",)}
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^(```|~~~)")


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


def _html_to_markdown(html: bytes | str) -> str:
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(["script", "style", "noscript", "template", "head", "nav", "footer"]):  # not the page's text
        tag.decompose()
    converter = MarkdownConverter(heading_style="ATX", bullets="-", escape_underscores=False,
                                  escape_asterisks=False, escape_misc=False)
    return converter.convert_soup(soup.body or soup)


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


def convert(data: bytes, kind: str) -> tuple[str, str | None]:
    """``(Markdown text, title)`` of a file's bytes under converter ``kind`` (see :data:`KINDS`); the title is the
    document's own when its format stores one apart from the text (a PDF's Title), else None.

    Raises :class:`ConversionError` when the file cannot be read or converts to empty text.
    """
    title = None
    if kind in ("markdown", "text"):
        text = decode_utf8(data)
    elif kind == "html":
        text = _html_to_markdown(data)
    elif kind == "docx":
        text = _html_to_markdown(_docx_html(data))
    elif kind == "pdf":
        text, title = _pdf_text(data)
    else:
        raise ValueError(f"unknown converter {kind!r}")
    if not text.strip():
        hint = " (a scanned PDF without a text layer?)" if kind == "pdf" else ""
        raise ConversionError(f"converts to empty text{hint}")
    return _tidy(text), title
