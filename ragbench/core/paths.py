"""Names that become paths: one slug function, and a containment check where a path is built.

Every user-supplied name that ends up in a file name (a sweep name, hence its sweep id and report folder; a
spool folder; a collection folder; a fine-tuned model name) goes through :func:`slug`, and every path built from
such a name under the home goes through :func:`within`, so nothing is written outside the home or an output
folder the user named. Display names stay as the user wrote them: only paths use the slug.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from ragbench.core.errors import RagbenchError

#: the longest slug: a file name is at most 255 bytes, and ids built on a slug add a time stamp and a hash
MAX_SLUG = 80
#: characters a slug keeps; everything else (separators, spaces, control characters, non-ASCII) is replaced
_KEEP = re.compile(r"[^A-Za-z0-9._-]+")
_HASH_CHARS = 8


class PathEscapeError(RagbenchError):
    """A path built from a name would lie outside the folder it belongs in."""


def is_slug(name: str, max_len: int = MAX_SLUG) -> bool:
    """Whether ``name`` is already a safe file-name component (what :func:`slug` returns unchanged): only ASCII
    letters, digits, ``.``, ``_`` and ``-``; no ``..``; not starting with ``.`` or ``-``; 1 to ``max_len``
    characters."""
    return (0 < len(name) <= max_len and not _KEEP.search(name) and ".." not in name
            and not name.startswith((".", "-")))


def slug(name: str, max_len: int = MAX_SLUG) -> str:
    """``name`` as one safe file-name component.

    A name that :func:`is_slug` accepts is returned as it is (so ``demo`` stays ``demo`` and every id built on it
    is unchanged). Any other name is rewritten: each run of other characters becomes ``-``, runs of dots become
    one dot, leading dots and dashes go, the rest is cut to ``max_len - 9`` characters, and ``-`` plus the first
    8 hex digits of the SHA-256 of the name as written (UTF-8, lone surrogates kept) is appended, so two different
    names that had to change never share a slug. The result always passes :func:`is_slug`, so ``slug(slug(x)) ==
    slug(x)``: a slug can be taken again where a path is built without changing it.
    """
    if is_slug(name, max_len):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_CHARS]
    base = re.sub(r"\.{2,}", ".", _KEEP.sub("-", name)).lstrip(".-")
    base = base[:max_len - _HASH_CHARS - 1].rstrip(".-")
    return f"{base}-{digest}" if base else f"x-{digest}"


def within(root: str | os.PathLike, *parts: str, what: str = "path") -> Path:
    """``root / parts...``, refused with :class:`PathEscapeError` unless it resolves (symbolic links followed)
    inside ``root``: a part that is absolute, holds ``..`` or leads through a link out of ``root`` is an error
    naming the path, never a file written elsewhere. Parts are joined as given: pass user names through
    :func:`slug` first."""
    base = Path(root)
    path = base.joinpath(*parts)
    inside, resolved = base.resolve(), path.resolve()
    if resolved != inside and not resolved.is_relative_to(inside):
        raise PathEscapeError(f"refusing to write {what} {path}: it resolves to {resolved}, outside {inside}")
    return path


def home_path(home: str | os.PathLike, folder: str, name: str, what: str = "path") -> Path:
    """``<home>/<folder>/<slug(name)>``, checked to lie inside the home (:func:`within`): where a folder of the
    home (``reports``, ``spool``) keeps something named after a user-supplied name."""
    return within(home, folder, slug(name), what=what)
