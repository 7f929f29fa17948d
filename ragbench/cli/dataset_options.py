"""The options of ``datasets validate``, generated from the dataset formats' options models.

Every field of every registered format (:func:`ragbench.data.dataset_options`) becomes one option, named after
the field (``squad_documents`` -> ``--squad-documents``), typed from its annotation and helped by its description:
a new option of a format is one field in that format's model. Every generated option defaults to "not given", so
it overrides a ``--config`` file's field only when it is set.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

import typer

#: fields the command takes another way (the PATH argument)
NOT_OPTIONS = ("path",)
#: what the command does when an option is left out, where that differs from the field's default
CLI_DEFAULTS = {
    "format": "default: the format that recognizes PATH (squad for a .json file, beir for a folder with "
              "corpus.jsonl, queries.jsonl or qrels/, folder for any other folder), else beir",
    "queries": "default: all without --config, to check every query",
}


def _plain(annotation: Any) -> Any:
    """``X | None`` -> ``X`` (every option may be left out)."""
    if typing.get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else annotation
    return annotation


def option_parameter(opt) -> inspect.Parameter:
    """The typer parameter of one :class:`~ragbench.data.DatasetOption`: a flag pair for a bool, a repeatable
    option for a tuple, a choice for a Literal, else the field's type; help is the field's description."""
    ann = _plain(opt.field.annotation)
    if typing.get_origin(ann) in (Union, types.UnionType) and bool in typing.get_args(ann):
        ann = bool  # true/false on the command line; the mapping form only in a sweep file
    elif typing.get_origin(ann) in (Union, types.UnionType) and float in typing.get_args(ann):
        ann = float  # holdout: the share on the command line; the mapping form only in a sweep file
    help_text = "; ".join(p for p in (opt.field.description or opt.name.replace("_", " "),
                                      CLI_DEFAULTS.get(opt.name, "")) if p)
    help_text = re.sub(r"<([^<>\s]+)>", r"`<\1>`", help_text)  # markdown help would drop <measure> as HTML
    if typing.get_origin(ann) is tuple:
        item = typing.get_args(ann)[0]
        typ, default = Annotated[Optional[list[item]], typer.Option(help=help_text + " (repeat it)")], None
    elif ann is bool:
        flag = opt.name.replace("_", "-")
        typ, default = Annotated[Optional[bool], typer.Option(f"--{flag}/--no-{flag}", help=help_text)], None
    elif typing.get_origin(ann) is Literal or ann in (str, int, float, Path):
        typ, default = Annotated[Optional[ann], typer.Option(help=help_text)], None
    else:
        raise TypeError(f"dataset option {opt.name!r}: no command-line form for {opt.field.annotation!r}")
    return inspect.Parameter(opt.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=typ)


def given_options(values: dict[str, Any]) -> dict[str, Any]:
    """The options set on the command line, as field values (a repeated option as a tuple)."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items() if v not in (None, [], ())}


def with_dataset_options(fn: Callable[..., None]) -> "DatasetOptionsCommand":
    """Decorator for a command ``fn(<its own parameters>, given: dict)``: the command takes every dataset option
    as well (:func:`option_parameter`), and ``fn`` receives those set on the command line in ``given``."""
    return DatasetOptionsCommand(fn)


class DatasetOptionsCommand:
    """A command callback whose signature is ``fn``'s own parameters plus one option per dataset field.

    The signature is computed whenever the command line is built (typer reads ``__signature__`` then), so a
    format registered by any module imported before the CLI runs brings its options with it."""

    def __init__(self, fn: Callable[..., None]):
        self.fn = fn
        self.__name__, self.__qualname__ = fn.__name__, fn.__qualname__
        self.__doc__, self.__module__ = fn.__doc__, fn.__module__
        self._own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
                     for p in inspect.signature(fn, eval_str=True).parameters.values() if p.name != "given"]

    def _options(self) -> list[inspect.Parameter]:
        from ragbench.data import dataset_options

        options = [option_parameter(o) for o in dataset_options() if o.name not in NOT_OPTIONS]
        clash = {p.name for p in self._own} & {p.name for p in options}
        if clash:
            raise TypeError(f"{self.__name__}: dataset options {sorted(clash)} clash with the command's parameters")
        return options

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.Signature(self._own + self._options())

    @property
    def __annotations__(self) -> dict[str, Any]:  # what typing.get_type_hints reads
        return {p.name: p.annotation for p in self.__signature__.parameters.values()}

    def __call__(self, **kwargs: Any) -> None:
        own = {p.name for p in self._own}
        return self.fn(**{k: v for k, v in kwargs.items() if k in own},
                       given=given_options({k: v for k, v in kwargs.items() if k not in own}))
