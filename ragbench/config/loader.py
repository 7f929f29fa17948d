"""Loading a sweep YAML: validated before any heavy work, every error naming the file and line.

Beyond the specs' own validation, a sweep file is refused when a key is given twice in one mapping (YAML would keep
the last silently), when the same chunker, embedder or retriever is listed twice (it would be evaluated and shown
twice), and when ``metrics.primary`` or ``metrics.show`` names a measure the sweep does not compute (``show`` may
name ``heldout/<measure>`` when the dataset has a ``holdout``; ``primary`` never: configs rank on the tuning set).

The file is read with the limits of :mod:`ragbench.core.bounded_io`: its size, each line's length, and YAML aliases
allowed (anchors are a fair way to share settings) but bounded in what they expand to.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import yaml
from pydantic import ValidationError

from ragbench.config.sweep import SweepConfig
from ragbench.core.bounded_io import MAX_CONFIG_BYTES, check_lines, load_yaml, read_text
from ragbench.core.errors import ConfigError
from ragbench.data.holdout import HELDOUT_PREFIX


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


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping."""


def _no_duplicate_keys(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False):
    seen: dict = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"key {key!r} is given twice (first on line "
                                                    f"{seen[key]})", key_node.start_mark)
        seen[key] = key_node.start_mark.line + 1
    return loader.construct_mapping(node, deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicate_keys)

#: measures that are not rank measures at a cutoff but can be shown in the leaderboard (config-level values)
SHOWABLE_PREFIXES = ("chunkstat_", "reach_", "unfiltered_", "ann_recall_vs_exact@", "answer_", "oracle_",
                     "rerank_ms", "filter_", "evidence_recall@", "answer_in_context@", "document_depth_", "rewrite_")


def computed_measures(cfg: SweepConfig) -> set[str]:
    """The per-query measures a sweep computes: ``{measure}@{k}`` for every rank measure and cutoff, and, when
    span metrics are on, ``span_*@k``, ``chunk_{measure}@k`` and ``evidence_recall@{N}tok``."""
    from ragbench.evaluation.measures.judged import COVERAGE_MEASURES
    from ragbench.evaluation.spans import SPAN_MEASURES

    m = cfg.metrics
    names = {f"{name}@{k}" for name in m.rank_measures for k in m.cutoffs}
    if m.spans:
        names |= {f"{name}@{k}" for name in SPAN_MEASURES for k in m.cutoffs}
        names |= {f"chunk_{name}@{k}" for name in m.measures if name not in COVERAGE_MEASURES for k in m.cutoffs}
        names |= {f"evidence_recall@{b}tok" for b in m.budgets}
    return names


def _semantic_errors(cfg: SweepConfig, root: yaml.Node, path: Path) -> list[str]:
    """Duplicate entries and measures the sweep would not compute, as ``file:line: where: what`` lines."""
    errors = []
    for section in ("chunkers", "embedders", "retrievers"):
        first: dict[str, int] = {}
        for i, spec in enumerate(getattr(cfg, section)):
            if spec.spec_id in first:
                errors.append(f"{path}:{_yaml_line(root, (section, i))}: {section}.{i}: the same as {section}."
                              f"{first[spec.spec_id]} (it would be evaluated twice); remove one")
            first.setdefault(spec.spec_id, i)
    computed = computed_measures(cfg)

    def unknown(name: str, where: tuple, per_query: bool) -> None:
        if name.startswith(HELDOUT_PREFIX):
            if per_query:  # ranking on the held-out set would make it one more tuning set
                errors.append(f"{path}:{_yaml_line(root, where)}: {'.'.join(map(str, where))}: {name!r}: configs "
                              f"are ranked on the tuning queries; name the measure without {HELDOUT_PREFIX!r}")
                return
            if cfg.dataset.holdout is None:
                errors.append(f"{path}:{_yaml_line(root, where)}: {'.'.join(map(str, where))}: {name!r} needs "
                              "dataset.holdout (there is no held-out set)")
                return
            name = name[len(HELDOUT_PREFIX):]
        if name in computed or (not per_query and name.startswith(SHOWABLE_PREFIXES)):
            return
        close = difflib.get_close_matches(name, sorted(computed), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; it computes e.g. {', '.join(sorted(computed)[:6])}"
        errors.append(f"{path}:{_yaml_line(root, where)}: {'.'.join(map(str, where))}: {name!r} is not a measure "
                      f"this sweep computes{hint}")

    unknown(cfg.metrics.primary, ("metrics", "primary"), per_query=True)
    for i, name in enumerate(cfg.metrics.show or ()):
        unknown(name, ("metrics", "show", i), per_query=False)
    return errors


def _is_path_like(value: str) -> bool:
    """A model named by a file or folder (``./my-model``, ``../models/x``, ``~/m``, ``/abs``, ``x.gguf``), not a
    packaged or hub name such as ``all-MiniLM-L6-v2`` or ``BAAI/bge-small-en-v1.5``."""
    return value.startswith(("./", "../", "~", "/")) or value.endswith(".gguf")


def _against(sweep_file: Path, value: object) -> str:
    p = Path(os.path.expandvars(str(value))).expanduser()
    return str(p if p.is_absolute() else (sweep_file.parent / p).resolve())


def _resolve_paths(raw: dict, sweep_file: Path, root: yaml.Node | None) -> None:
    """Every path in a sweep file, resolved against the file (not the working directory, not the documents
    folder): ``dataset.path``, ``dataset.questions``, ``output.home`` and every ``model`` given as a path
    (:func:`_is_path_like`). A ``questions`` file found only inside the documents folder (where it was looked up
    before paths followed the sweep file) is an error that names the path to write."""
    ds = raw.get("dataset")
    if isinstance(ds, dict):
        if "path" in ds:
            ds["path"] = _against(sweep_file, ds["path"])
        if isinstance(ds.get("questions"), str):
            given, ds["questions"] = ds["questions"], _against(sweep_file, ds["questions"])
            in_folder = Path(str(ds.get("path", sweep_file.parent))) / given
            if not Path(ds["questions"]).exists() and in_folder.exists():
                line = _yaml_line(root, ("dataset", "questions"))
                raise ConfigError(f"{sweep_file}:{line}: dataset.questions: {given} is not next to the sweep file "
                                  f"(paths in a sweep file are relative to it); write "
                                  f"{os.path.relpath(in_folder, sweep_file.parent)}")
    out = raw.get("output")
    if isinstance(out, dict) and isinstance(out.get("home"), str):
        out["home"] = _against(sweep_file, out["home"])

    def models(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "model" and isinstance(value, str) and _is_path_like(value):
                    node[key] = _against(sweep_file, value)
                else:
                    models(value)
        elif isinstance(node, list):
            for item in node:
                models(item)

    models({k: v for k, v in raw.items() if k != "dataset"})


def load_config(path: str | os.PathLike) -> SweepConfig:
    """Read and validate a sweep YAML. Errors name the file and line; every path in it resolves against the file
    (:func:`_resolve_paths`)."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{path}: is a folder, not a config file; name the sweep YAML inside it")
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    text = read_text(path, MAX_CONFIG_BYTES, "sweep config", ConfigError)
    check_lines(path, text, ConfigError)
    raw, root = load_yaml(path, text, ConfigError, aliases="bounded", loader=_StrictLoader)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}:1: expected a mapping at the top level")
    _resolve_paths(raw, path, root)
    try:
        cfg = SweepConfig.model_validate(raw)
    except ValidationError as e:
        lines = []
        for err in e.errors():
            loc = err["loc"]
            line = _yaml_line(root, loc)
            dotted = ".".join(str(x) for x in loc) or "(top level)"
            msg = str(err["ctx"]["error"]) if err["type"] == "value_error" else err["msg"]  # not "Value error, ..."
            lines.append(f"{path}:{line}: {dotted}: {msg}")
        raise ConfigError("invalid sweep config\n" + "\n".join(lines)) from None
    errors = _semantic_errors(cfg, root, path)
    if errors:
        raise ConfigError("invalid sweep config\n" + "\n".join(errors))
    return cfg
