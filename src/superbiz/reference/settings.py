"""Every settings key, from the settings model: its key, type, default, environment
variable and description (the docstring under it in ``superbiz.config``)."""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from superbiz.config import Settings, SourceLinkSettings, SourcesSettings
from superbiz.reference._docstrings import attribute_doc
from superbiz.reference._markdown import code, first_sentence

#: why an advanced key exists: the word its description starts with
WHY = ("Tuning", "Fitted", "Baseline", "Internal")
_WHY = re.compile(rf"^({'|'.join(WHY)}): ")
#: sections whose other keys are named by the user, each holding this section
_NAMED_SECTIONS: dict[type[BaseModel], tuple[str, type[BaseModel]]] = {
    SourcesSettings: ("<name>", SourceLinkSettings),
}


@dataclass(frozen=True)
class SettingKey:
    """One key as the reference shows it."""

    path: tuple[str, ...]  # field names, ``("advanced", "retrieval", "rrf_k")``
    kind: str
    default: str
    description: str

    @property
    def key(self) -> str:
        """The key as ``superbiz.yaml`` writes it: ``advanced.retrieval.rrf-k``."""
        return ".".join(part.replace("_", "-") for part in self.path)

    @property
    def env(self) -> str:
        """Its environment variable: ``SUPERBIZ_ADVANCED__RETRIEVAL__RRF_K``."""
        return "SUPERBIZ_" + "__".join(part.upper() for part in self.path)

    @property
    def section(self) -> tuple[str, ...]:
        return self.path[:-1]

    @property
    def advanced(self) -> bool:
        return self.path[0] == "advanced"

    @property
    def why(self) -> str | None:
        """Tuning, Fitted, Baseline or Internal for an advanced key (None if it says none)."""
        found = _WHY.match(self.description)
        return found.group(1).lower() if found else None

    @property
    def text(self) -> str:
        """The description without its why."""
        text = _WHY.sub("", self.description)
        return text[:1].upper() + text[1:]


@dataclass(frozen=True)
class SettingSection:
    """A section (``retrieval.normalization``) and what its class says of it."""

    path: tuple[str, ...]
    description: str

    @property
    def key(self) -> str:
        return ".".join(part.replace("_", "-") for part in self.path)


def setting_keys(model: type[BaseModel] = Settings) -> list[SettingKey]:
    """Every leaf key of ``model``, in the model's order."""
    return [item for item in _walk(model, ()) if isinstance(item, SettingKey)]


def setting_sections(model: type[BaseModel] = Settings) -> list[SettingSection]:
    """Every section of ``model``, in the model's order."""
    return [item for item in _walk(model, ()) if isinstance(item, SettingSection)]


def _walk(model: type[BaseModel], path: tuple[str, ...]) -> Iterator[SettingKey | SettingSection]:
    for name, field in model.model_fields.items():
        section = _section_type(field.annotation)
        if section is not None:
            yield SettingSection((*path, name), _class_doc(section))
            yield from _walk(section, (*path, name))
        else:
            yield SettingKey(
                (*path, name),
                _kind(field),
                _default(field),
                " ".join(attribute_doc(model, name).split()),
            )
    if model in _NAMED_SECTIONS:
        placeholder, named = _NAMED_SECTIONS[model]
        yield SettingSection((*path, placeholder), _class_doc(named))
        yield from _walk(named, (*path, placeholder))


def _section_type(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds (``X`` or ``X | None``), or None for a plain value."""
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _class_doc(cls: type) -> str:
    return inspect.cleandoc(cls.__doc__ or "")


def _kind(field: FieldInfo) -> str:
    """``float or null, from -1 to 1``: the type as a user writes it, and its bounds."""
    bounds = []
    for item in field.metadata:
        for attribute, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            if isinstance(item, annotated_types.BaseMetadata) and hasattr(item, attribute):
                bounds.append(f"{sign} {getattr(item, attribute)}")
    kind = _type_name(field.annotation)
    for item in field.metadata:
        if isinstance(item, annotated_types.MinLen) and item.min_length:
            bounds.append("not empty" if kind == "str" else f"at least {item.min_length}")
    return f"{kind}, {', '.join(bounds)}" if bounds else kind


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        return "one of " + ", ".join(code(str(arg)) for arg in args)
    if origin in (types.UnionType, typing.Union):
        named = [_type_name(arg) for arg in args if arg is not type(None)]
        return " or ".join(named) + (" or null" if type(None) in args else "")
    if origin in (tuple, list):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"mapping of {_type_name(args[0])} to {_type_name(args[1])}"
    names = {bool: "bool", int: "int", float: "float", str: "str", Path: "path"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _default(field: FieldInfo) -> str:
    """The default as YAML would write it; ``required`` when there is none."""
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    return _yaml_value(value)


def _yaml_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_yaml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


# -- Markdown -----------------------------------------------------------------------------


def user_settings_markdown() -> str:
    """The user settings, section by section."""
    return _settings_markdown(advanced=False)


def advanced_settings_markdown() -> str:
    """The ``advanced`` settings, section by section, each with why it is there."""
    return _settings_markdown(advanced=True)


def _settings_markdown(*, advanced: bool) -> str:
    keys = [key for key in setting_keys() if key.advanced == advanced]
    sections = {section.path: section for section in setting_sections()}
    order = {path: index for index, path in enumerate([(), *sections])}  # parents first
    lines: list[str] = []
    for path in sorted({key.section for key in keys}, key=order.__getitem__):
        section = sections.get(path)
        title = code(section.key) if section else "Top level"
        label = "settings-" + ("-".join(path).replace("_", "-").strip("<>") or "top")
        lines += [f"({label.replace('<', '').replace('>', '')})=", f"## {title}", ""]
        if section and section.description:
            lines += [section.description, ""]
        for key in (key for key in keys if key.section == path):
            lines += _key_entry(key)
    return "\n".join(lines)


def _key_entry(key: SettingKey) -> list[str]:
    facts = [f"type: {key.kind}", f"default: {code(key.default)}", f"environment: {code(key.env)}"]
    if key.why:
        facts.insert(0, f"why: **{key.why}**")
    return [code(key.key), f": {key.text}", "", "  " + " · ".join(facts), ""]


def settings_yaml() -> str:
    """A ``superbiz.yaml`` holding every user setting at its default, commented."""
    lines = ["```yaml"]
    shown: set[tuple[str, ...]] = set()
    for key in setting_keys():
        if key.advanced:
            continue
        for depth in range(len(key.section)):
            section = key.section[: depth + 1]
            if section not in shown:
                shown.add(section)
                lines.append("  " * depth + section[-1].replace("_", "-") + ":")
        indent = "  " * len(key.section)
        entry = f"{indent}{key.path[-1].replace('_', '-')}: {key.default}"
        lines.append(f"{entry:<36} # {_short(first_sentence(key.text))}")
    return "\n".join([*lines, "```"])


def _short(text: str, most: int = 60) -> str:
    """``text`` cut at a word to at most ``most`` characters (the full text is below)."""
    if len(text) <= most:
        return text
    cut = text[: text.rfind(" ", 0, most - 1)].removesuffix(",").removesuffix(" e.g.")
    return cut + " …"
