"""The settings reference is the settings model: every key, documented, with an
environment variable that really sets it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from superbiz.config import Settings, load_settings
from superbiz.exceptions import ConfigError
from superbiz.reference._docstrings import attribute_doc
from superbiz.reference.settings import (
    WHY,
    advanced_settings_markdown,
    setting_keys,
    settings_yaml,
    user_settings_markdown,
)


def _schema_keys(schema: dict[str, Any], defs: dict[str, Any], prefix: str = "") -> set[str]:
    """Every leaf key of a JSON schema, walked apart from the reference's own walk."""
    keys: set[str] = set()
    for name, prop in schema.get("properties", {}).items():
        refs = [prop.get("$ref")] + [option.get("$ref") for option in prop.get("anyOf", [])]
        target = next((ref for ref in refs if ref), None)
        if target is not None:
            keys |= _schema_keys(defs[target.rsplit("/", 1)[-1]], defs, f"{prefix}{name}.")
        else:
            keys.add(f"{prefix}{name}")
    return keys


def test_every_settings_key_of_the_model_is_in_the_generated_reference() -> None:
    schema = Settings.model_json_schema(by_alias=True)
    keys = _schema_keys(schema, schema.get("$defs", {}))
    assert len(keys) > 80 and "advanced.retrieval.rrf-k" in keys  # the walk reached the leaves
    pages = user_settings_markdown() + advanced_settings_markdown()
    missing = sorted(key for key in keys if f"`{key}`" not in pages)
    assert not missing, f"settings missing from the reference: {missing}"


def test_every_setting_has_a_description_and_every_advanced_one_its_why() -> None:
    keys = setting_keys()
    undocumented = [key.key for key in keys if not key.description.strip()]
    assert not undocumented, (
        f"give these keys a docstring under their field in superbiz/config/: {undocumented}"
    )
    whyless = [key.key for key in keys if key.advanced and key.why is None]
    assert not whyless, f"start these docstrings with one of {WHY} and a colon: {whyless}"


class _Documented(BaseModel):
    kept: int = 1
    """Said under the field."""
    bare: int = 2


def test_a_field_without_a_docstring_has_no_description() -> None:
    """What the test above catches: a key added without a docstring."""
    assert attribute_doc(_Documented, "kept") == "Said under the field."
    assert attribute_doc(_Documented, "bare") == ""
    assert [key.description for key in setting_keys(_Documented)] == ["Said under the field.", ""]


def test_each_entry_gives_type_default_and_environment_variable() -> None:
    entry = advanced_settings_markdown().split("`advanced.retrieval.rrf-k`\n", 1)[1]
    entry = entry.split("\n\n`", 1)[0]
    assert "why: **tuning**" in entry
    assert "type: int, ≥ 1" in entry and "default: `60`" in entry
    assert "environment: `SUPERBIZ_ADVANCED__RETRIEVAL__RRF_K`" in entry
    user = user_settings_markdown()
    assert "default: `[utf-8]`" in user and "`SUPERBIZ_INGEST__ENCODINGS`" in user
    assert "`sources.<name>.web-url`" in user and "`SUPERBIZ_SOURCES__<NAME>__WEB_URL`" in user


def test_the_example_yaml_holds_every_user_key_at_its_default_and_loads() -> None:
    text = settings_yaml()
    body = text.removeprefix("```yaml\n").removesuffix("\n```")
    for key in setting_keys():
        if not key.advanced:
            assert re.search(rf"^\s*{re.escape(key.path[-1].replace('_', '-'))}:", body, re.M)
    assert not re.search(r"^advanced:", body, re.M)
    defaults = Settings().model_dump(exclude={"sources"})
    Path("superbiz.yaml").write_text(body, encoding="utf-8")  # the test's own directory
    assert load_settings().model_dump(exclude={"sources"}) == defaults


@pytest.mark.parametrize(
    "key",
    [
        key
        for key in setting_keys()
        if key.kind.split(",")[0] in {"int", "float", "bool"} or key.kind.startswith("one of")
    ],
    ids=lambda key: key.key,
)
def test_the_environment_variable_shown_sets_the_key(
    key: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A value the key cannot take, in the variable the reference names, is refused
    naming the key: the variable is read, for that key."""
    monkeypatch.setenv(key.env, "not-a-value")
    with pytest.raises(ConfigError) as refused:
        load_settings()
    assert key.path[-1] in str(refused.value) or key.key in str(refused.value)
