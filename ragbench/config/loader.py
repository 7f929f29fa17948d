"""Loading a sweep YAML: validated before any heavy work, every error naming the file and line."""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from pydantic import ValidationError

from ragbench.config.sweep import SweepConfig
from ragbench.core.errors import ConfigError


def _yaml_line(root: yaml.Node | None, loc: tuple) -> int | None:
    """1-based line of the YAML node at pydantic error location ``loc`` (deepest node found)."""
    node, line = root, (root.start_mark.line + 1 if root is not None else None)
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = next((v for k, v in node.value if k.value == str(key)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            nxt = node.value[key]
        else:
            nxt = None
        if nxt is None:
            break
        node, line = nxt, nxt.start_mark.line + 1
    return line


def load_config(path: str | os.PathLike) -> SweepConfig:
    """Read and validate a sweep YAML. Errors name the file and line; dataset paths resolve against the file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    text = path.read_text(encoding="utf-8")
    try:
        raw = yaml.safe_load(text)
        root = yaml.compose(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ConfigError(f"{where}: invalid YAML: {getattr(e, 'problem', e)}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}:1: expected a mapping at the top level")
    ds = raw.get("dataset")
    if isinstance(ds, dict) and "path" in ds:
        p = Path(os.path.expandvars(str(ds["path"])))
        ds["path"] = str(p if p.is_absolute() else (path.parent / p).resolve())
    try:
        return SweepConfig.model_validate(raw)
    except ValidationError as e:
        lines = []
        for err in e.errors():
            loc = err["loc"]
            line = _yaml_line(root, loc)
            dotted = ".".join(str(x) for x in loc) or "(top level)"
            lines.append(f"{path}:{line}: {dotted}: {err['msg']}")
        raise ConfigError("invalid sweep config\n" + "\n".join(lines)) from None
