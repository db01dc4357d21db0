"""The settings reference page (`docs/settings.md`), rendered from the settings models themselves: every key with its
type, default and description, section by section; a union of settings classes (the filter blocks by `block`, the
runners by `kind`) one table per member. `llm-assets settings --reference` prints it; a test keeps the page equal to
it. Nothing here imports Dagster."""

from __future__ import annotations

import inspect
import json
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from enum import Enum
from pathlib import Path
from typing import Any, Literal, Union

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from llm_assets.settings import Settings

HEADER = """# Settings reference

Generated from the settings models (`llm_assets/settings.py` and the sections it composes) by
`llm-assets settings --reference`; do not edit by hand: `make snapshots` rewrites it. A deployment's settings are one
YAML file (`--settings PATH` on any command, else `LLM_ASSETS_SETTINGS`, else `llm_assets/settings.yaml`); a key left
out takes the default below, and an unknown key is an error naming it. `llm-assets settings` prints the effective
values."""


@dataclass(frozen=True)
class Row:
    key: str
    type: str
    default: str
    description: str


def render() -> str:
    """The reference page, Markdown."""
    parts = [HEADER]
    top = [f for f in Settings.model_fields.items() if _section(f[1].annotation) is None]
    parts.append(_table("Top level", "", [_row(name, f) for name, f in top]))
    for name, field in Settings.model_fields.items():
        if _section(field.annotation) is not None:
            parts.extend(_sections(name, field, level=2))
    return "\n\n".join(parts) + "\n"


def _sections(path: str, field: FieldInfo, level: int) -> Iterator[str]:
    """The sections of one field holding settings classes: its own table, then one per nested section or member."""
    kind, members, discriminator = _section(field.annotation) or ("", [], None)
    intro = field.description or ""
    if discriminator is None:
        (model,) = members
        key = path + {"one": "", "list": "[]", "map": ".<name>"}[kind]
        yield from _model(key, model, intro, level)
        return
    where = f"`{path}`" + (" is a list: each item" if kind == "list" else "")
    intro += f" {where} is one of {len(members)} kinds, named by `{discriminator}`."
    default = field.get_default(call_default_factory=True) if not field.is_required() else None
    if isinstance(default, BaseModel):
        intro += f" Default: `{getattr(default, discriminator)}`."
    elif isinstance(default, tuple) and all(isinstance(d, BaseModel) for d in default):
        intro += " Default: " + ", ".join(f"`{getattr(d, discriminator)}`" for d in default) + "."
    yield f"{'#' * level} `{path}`\n\n{intro}"
    for model in members:
        value = _literal_value(model.model_fields[discriminator].annotation)
        key = f"{path}[{value}]" if kind == "list" else path
        yield from _model(key, model, _first_paragraph(model), level + 1, f"`{path}` {discriminator}: `{value}`",
                          first=discriminator)


def _model(key: str, model: type[BaseModel], intro: str, level: int, title: str | None = None,
           first: str | None = None) -> Iterator[str]:
    rows, nested = [], []
    # the field that names a union's member (`first`) comes first, as a settings file writes it
    fields = sorted(model.model_fields.items(), key=lambda f: f[0] != first)
    for name, field in fields:
        if _section(field.annotation) is None:
            rows.append(_row(f"{key}.{name}", field))
        else:
            nested.append((name, field))
    if rows:
        yield _table(title or f"`{key}`", intro, rows, level)
    else:
        yield f"{'#' * level} {title or f'`{key}`'}" + (f"\n\n{intro}" if intro else "")
    for name, field in nested:
        yield from _sections(f"{key}.{name}", field, level + 1)


def _table(title: str, intro: str, rows: list[Row], level: int = 2) -> str:
    lines = [f"{'#' * level} {title}", ""]
    if intro:
        lines += [intro, ""]
    lines += ["| key | type | default | description |", "|---|---|---|---|"]
    lines += [f"| `{r.key}` | {_cell(r.type)} | {_cell(r.default)} | {_cell(r.description)} |" for r in rows]
    return "\n".join(lines)


def _row(key: str, field: FieldInfo) -> Row:
    return Row(key, _type_name(field.annotation), _default(field), field.description or "")


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    return f"`{json.dumps(_plain(value), ensure_ascii=False)}`"


def _plain(value: Any) -> Any:
    """A default as YAML/JSON spells it: tuples as lists, paths and dates as strings."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (Path, Enum)):
        return str(value.value if isinstance(value, Enum) else value)
    if isinstance(value, date):
        return value.isoformat()
    return value


def _type_name(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is type(None):
        return "null"
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is Literal:
        return " | ".join(f"`{a}`" for a in args)
    if origin in (Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return f"list of {_type_name(args[0])}"
        return f"[{', '.join(_type_name(a) for a in args)}]"
    if origin in (list, set, frozenset):
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"map of {_type_name(args[0])} to {_type_name(args[1])}"
    if annotation is Any:
        return "any"
    if isinstance(annotation, type):
        if issubclass(annotation, Path):
            return "path"
        return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(
            annotation.__name__, annotation.__name__)
    return str(annotation)


def _section(annotation: Any) -> tuple[str, list[type[BaseModel]], str | None] | None:
    """(how the field holds settings classes: one, a list or a map; the classes; the discriminator of a union), or
    None for a field of plain values."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    kind = "one"
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        kind, annotation = "list", args[0]
    elif origin is dict:
        kind, annotation = "map", args[1]
    discriminator = None
    if typing.get_origin(annotation) is typing.Annotated:
        annotation, *meta = typing.get_args(annotation)
        discriminator = next((m.discriminator for m in meta if isinstance(m, FieldInfo)
                              and isinstance(m.discriminator, str)),
                             None)
    if typing.get_origin(annotation) in (Union, types.UnionType):
        # a member tagged for a callable discriminator (the runners: `Annotated[PoolRunnerSettings, Tag("pool")]`)
        unwrapped = [typing.get_args(a)[0] if typing.get_origin(a) is typing.Annotated else a
                     for a in typing.get_args(annotation)]
        members = [a for a in unwrapped if isinstance(a, type) and issubclass(a, BaseModel)]
        if not members:
            return None
        discriminator = discriminator or _common_literal(members)
        return kind, members, discriminator
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return kind, [annotation], None
    return None


def _common_literal(members: list[type[BaseModel]]) -> str | None:
    """The field every member declares as a distinct Literal: how a union without an explicit discriminator is
    told apart."""
    names = set.intersection(*({n for n, f in m.model_fields.items() if typing.get_origin(f.annotation) is Literal}
                               for m in members))
    return min(names) if names else None


def _literal_value(annotation: Any) -> str:
    return str(typing.get_args(annotation)[0])


def _first_paragraph(model: type[BaseModel]) -> str:
    doc = model.__doc__
    if not doc or doc is BaseModel.__doc__ or model.__dict__.get("__doc__") is None:
        return ""
    return " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())


def every_field(settings: type[BaseModel] = Settings) -> list[tuple[str, FieldInfo]]:
    """Every (key path, field) of the settings models, members of unions included: what the reference lists."""
    out: list[tuple[str, FieldInfo]] = []

    def walk(key: str, model: type[BaseModel]) -> None:
        for name, field in model.model_fields.items():
            out.append((f"{key}{name}", field))
            found = _section(field.annotation)
            for member in found[1] if found else []:
                walk(f"{key}{name}.{member.__name__}.", member)

    walk("", settings)
    return out
