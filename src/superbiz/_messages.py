"""Bilingual texts for users and models, kept as data: ``superbiz/messages/<language>.yaml``.

Keys are dotted paths (``decision.breaker.retry``). Both languages must have the same keys
with the same ``{placeholders}``; this is checked when the module is first imported, so a
missing or mistyped translation stops start-up instead of surfacing in the middle of a
turn. Low-level on purpose (no I/O beyond reading the packaged files): retrieval imports it.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

import yaml

from superbiz._text import Language
from superbiz.exceptions import ConfigError

__all__ = ["LANGUAGES", "check_languages", "load_messages", "localized", "placeholders"]

LANGUAGES: tuple[Language, ...] = ("zh", "en")


def placeholders(template: str) -> frozenset[str]:
    """The ``{names}`` a template expects (``{{`` escapes are not placeholders).

    >>> sorted(placeholders("Found {n} document(s): {titles} {{not}}"))
    ['n', 'titles']
    """
    return frozenset(
        field.split(".")[0].split("[")[0]
        for _, field, _, _ in string.Formatter().parse(template)
        if field is not None
    )


def check_languages(tables: Mapping[Language, Mapping[str, str]], what: str) -> None:
    """Raise :class:`ConfigError` naming every key a language lacks and every key whose
    placeholders differ between languages.

    >>> check_languages({"zh": {"a": "{n} 篇"}, "en": {"a": "{n} docs"}}, "messages")
    >>> check_languages({"zh": {"a": "{n} 篇", "b": "x"}, "en": {"a": "{count} docs"}}, "messages")
    Traceback (most recent call last):
    superbiz.exceptions.ConfigError: messages do not match across languages: en lacks 'b'; \
'a' has placeholders {n} in zh but {count} in en
    """
    problems = []
    keys = {key for table in tables.values() for key in table}
    for language in LANGUAGES:
        table = tables.get(language, {})
        problems += [f"{language} lacks {key!r}" for key in sorted(keys - set(table))]
    first, *others = LANGUAGES
    for key in sorted(keys):
        expected = placeholders(tables.get(first, {}).get(key, ""))
        for language in others:
            if key not in tables.get(language, {}) or key not in tables.get(first, {}):
                continue
            found = placeholders(tables[language][key])
            if found != expected:
                problems.append(
                    f"{key!r} has placeholders {_names(expected)} in {first} "
                    f"but {_names(found)} in {language}"
                )
    if problems:
        raise ConfigError(f"{what} do not match across languages: " + "; ".join(problems))


def _names(fields: frozenset[str]) -> str:
    return " ".join(f"{{{f}}}" for f in sorted(fields)) or "none"


def load_messages(directory: Traversable) -> dict[Language, dict[str, str]]:
    """Every ``<language>.yaml`` in ``directory``, flattened to dotted keys and checked."""
    tables: dict[Language, dict[str, str]] = {}
    for language in LANGUAGES:
        source = directory / f"{language}.yaml"
        if not source.is_file():
            raise ConfigError(f"message file {language}.yaml is missing")
        try:
            data = yaml.safe_load(source.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise ConfigError(f"message file {language}.yaml is not valid YAML: {exc}") from exc
        tables[language] = _flatten(data, f"{language}.yaml")
    check_languages(tables, "messages")
    return tables


def _flatten(data: Any, where: str, prefix: str = "") -> dict[str, str]:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: {prefix or 'the file'} must be a mapping of texts")
    flat: dict[str, str] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, where, f"{path}."))
        elif isinstance(value, str):
            flat[path] = value
        else:
            raise ConfigError(f"{where}: {path!r} must be a text, not {type(value).__name__}")
    return flat


_TABLES = load_messages(resources.files("superbiz") / "messages")


def localized(key: str, language: Language) -> str:
    """The ``language`` template of ``key``; the caller fills its placeholders.

    >>> localized("lookup.found", "en").format(n=1, titles='"Redis pool"')
    'Found 1 document(s): "Redis pool"'
    """
    try:
        return _TABLES[language][key]
    except KeyError:
        raise KeyError(f"no message {key!r} in {language}.yaml") from None
