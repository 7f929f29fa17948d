"""Reading user files with limits: a hostile or broken file fails in under a second, in bounded memory, with one
line naming the file (and the line, where one is to blame).

Limits (generous: far above any real sweep file, questions file or dataset):

* file size: :data:`MAX_CONFIG_BYTES` for a sweep YAML, :data:`MAX_QUESTIONS_BYTES` for a questions file and
  :data:`MAX_JSON_BYTES` for a whole-file JSON (SQuAD), all read whole; :data:`MAX_STREAMED_BYTES` for JSONL and
  TSV files read a line at a time; :data:`MAX_DOCUMENT_BYTES` for a document of a folder dataset (skipped, with a
  warning, when larger);
* line size: :data:`MAX_LINE_BYTES` for any line of any of them (a JSON Lines record, a CSV row, a YAML line);
* YAML aliases (``*name``): refused in data files (a questions file has no use for them); in a sweep file allowed,
  but the document they expand to is bounded by :data:`MAX_YAML_NODES` nodes, counted with every alias expanded
  (a "billion laughs" of nested aliases is a few lines that expand to 10^9 nodes);
* nesting: JSON or YAML nested deeper than Python's recursion limit is an error, not a ``RecursionError``.

Each failure raises the ``error`` class the caller passes (a :class:`~ragbench.core.errors.RagbenchError`), so
a config names itself a :class:`ConfigError` and a dataset file a :class:`DatasetError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Literal

import yaml

from ragbench.core.errors import RagbenchError

MiB = 1 << 20
#: a sweep YAML, read whole (a real one is a few KB)
MAX_CONFIG_BYTES = 4 * MiB
#: a questions file (CSV, JSONL or YAML), read whole
MAX_QUESTIONS_BYTES = 512 * MiB
#: a JSON file read whole (a SQuAD file: SQuAD v1.1 train is 30 MB)
MAX_JSON_BYTES = 2048 * MiB
#: a JSONL or TSV file read a line at a time (memory is bounded by the line, not the file)
MAX_STREAMED_BYTES = 256 * 1024 * MiB
#: one document file of a folder dataset (read whole to convert it); a larger one is skipped with a warning
MAX_DOCUMENT_BYTES = 1024 * MiB
#: one line of any file (a corpus record with a whole book as its text is a few MB)
MAX_LINE_BYTES = 64 * MiB
#: nodes of a sweep YAML with its aliases expanded (the demo config has about 60)
MAX_YAML_NODES = 100_000

AliasPolicy = Literal["refuse", "bounded"]


def check_size(path: Path, limit: int, what: str, error: type[RagbenchError]) -> int:
    """The size of ``path`` in bytes; ``error`` when it is over ``limit`` (named ``what`` in the message)."""
    size = Path(path).stat().st_size
    if size > limit:
        raise error(f"{path}: {size:,} bytes, more than a {what} may have ({limit:,}); is it the right file?")
    return size


def read_bytes(path: Path, limit: int, what: str, error: type[RagbenchError]) -> bytes:
    """The bytes of ``path``, checked against ``limit`` before reading (and while reading: a file that grows)."""
    size = check_size(path, limit, what, error)
    parts, total = [], 0
    with open(path, "rb") as f:
        while chunk := f.read(max(size, 1 << 16)):  # not read(limit): that would allocate the limit
            parts.append(chunk)
            total += len(chunk)
            if total > limit:
                raise error(f"{path}: more than a {what} may have ({limit:,} bytes); is it the right file?")
    return b"".join(parts)


def read_text(path: Path, limit: int, what: str, error: type[RagbenchError]) -> str:
    """The UTF-8 text of ``path`` (a byte-order mark dropped), read as :func:`read_bytes` reads; ``error`` naming the
    line and the byte when it is not UTF-8."""
    data = read_bytes(path, limit, what, error)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise error(f"{path}:{line}: not UTF-8 text (byte 0x{data[e.start]:02x}); save the file as UTF-8") from None


def check_lines(path: Path, text: str, error: type[RagbenchError], limit: int = MAX_LINE_BYTES) -> None:
    """``error`` naming the first line of ``text`` longer than ``limit`` characters (a character is at least one
    byte in UTF-8, so this bounds lines at most 4x looser than :func:`iter_lines` does: still bounded)."""
    pos, lineno = 0, 1
    while True:
        nl = text.find("\n", pos)
        end = len(text) if nl < 0 else nl
        if end - pos > limit:
            raise error(f"{path}:{lineno}: line of {end - pos:,} characters, longer than any line may be "
                        f"({limit:,})")
        if nl < 0:
            return
        pos, lineno = nl + 1, lineno + 1


def iter_lines(f: IO[bytes], path: Path, error: type[RagbenchError],
               limit: int = MAX_LINE_BYTES) -> Iterator[bytes]:
    """The lines of a binary file, as ``bytes`` with their line end; ``error`` naming the line when one is longer
    than ``limit`` bytes (read ``limit + 1`` bytes at most: a file without line ends is never read whole)."""
    lineno = 0
    while True:
        raw = f.readline(limit + 1)
        if not raw:
            return
        lineno += 1
        if len(raw) > limit and not raw.endswith(b"\n"):
            raise error(f"{path}:{lineno}: line longer than any line may be ({limit:,} bytes); is it a JSON Lines "
                        "or TSV file?")
        yield raw


def parse_json(text: str | bytes, where: str, error: type[RagbenchError]) -> Any:
    """``json.loads`` with every failure one ``error`` line at ``where`` (``file:line``): malformed JSON (with the
    column), or nesting too deep to parse."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        at = f"{where.rsplit(':', 1)[0]}:{e.lineno}" if e.lineno > 1 else where
        raise error(f"{at}: malformed JSON ({e.msg} at column {e.colno})") from None
    except RecursionError:
        raise error(f"{where}: JSON nested too deeply to read") from None


def _too_large(root: yaml.Node, limit: int) -> yaml.Node | None:
    """The first node (deepest first) whose value, with every alias expanded, has more than ``limit`` nodes, or
    one that holds an alias of itself; None when the document is within bounds. Each distinct node is visited
    once (an alias is a second reference to the same node object), so this is linear in the file."""
    memo: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in memo and not done:
            continue
        children = ([n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else
                    list(node.value) if isinstance(node, yaml.SequenceNode) else [])
        if not done:
            memo[id(node)] = -1  # in progress: an alias of an ancestor is a cycle
            stack.append((node, True))
            for child in children:
                if memo.get(id(child)) == -1:
                    return node
                stack.append((child, False))
            continue
        total = 1 + sum(memo[id(c)] for c in children)
        if total > limit:
            return node
        memo[id(node)] = total
    return None


class _RefuseAliases(yaml.SafeLoader):
    """SafeLoader that stops at the first alias (``*name``) with its line."""

    def compose_node(self, parent, index):  # noqa: D102 - PyYAML's hook
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, f"YAML alias *{event.anchor} (aliases are not read in "
                                              "data files: write the value out)", event.start_mark)
        return super().compose_node(parent, index)


def load_yaml(path: Path, text: str, error: type[RagbenchError], *, aliases: AliasPolicy,
              loader: type[yaml.SafeLoader] = yaml.SafeLoader) -> tuple[Any, yaml.Node | None]:
    """``(data, root node)`` of a YAML document, composed once. ``aliases="refuse"``: any alias is an error;
    ``"bounded"``: allowed while the expanded document has at most :data:`MAX_YAML_NODES` nodes. ``loader`` is a
    :class:`yaml.SafeLoader` subclass (its constructors run; with ``"refuse"`` it gets the alias check mixed in).
    Errors are one ``error`` line, ``file:line: invalid YAML: ...``."""
    cls = type("_Loader", (_RefuseAliases, loader), {}) if aliases == "refuse" else loader
    reader = cls(text)
    try:
        root = reader.get_single_node()
        if root is None:
            return None, None
        big = _too_large(root, MAX_YAML_NODES) if aliases == "bounded" else None
        if big is not None:
            raise error(f"{path}:{big.start_mark.line + 1}: YAML aliases expand to more than {MAX_YAML_NODES:,} "
                        "values here (nested aliases, or an alias of itself); write the values out")
        return reader.construct_document(root), root
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else f"{path}:1"
        raise error(f"{where}: invalid YAML: {getattr(e, 'problem', None) or e}") from None
    except RecursionError:
        raise error(f"{path}: YAML nested too deeply to read") from None
    finally:
        reader.dispose()
