"""The HTTP API, from the app's OpenAPI document: every route with its parameters, body
and responses, and every schema they name."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from superbiz.reference._markdown import cell, code, properties_table

_METHODS = ("get", "post", "put", "patch", "delete")


def openapi() -> dict[str, Any]:
    """The OpenAPI document of ``superbiz serve``, from an app over an empty, temporary
    data dir (the document does not depend on the knowledge base)."""
    from superbiz.api import create_app
    from superbiz.config import load_settings

    with tempfile.TemporaryDirectory() as data_dir:
        app = create_app(load_settings(data_dir=Path(data_dir)), warm_up=False)
        try:
            return app.openapi()
        finally:
            app.state.service.close()


def http_markdown() -> str:
    """The HTTP reference: every route (a ``###`` section each), then ``## Schemas``."""
    document = openapi()
    lines = [document["info"].get("description", ""), ""]
    for path, item in document["paths"].items():
        for method in _METHODS:
            if method in item:
                lines += _operation(method, path, item[method])
    lines += ["(http-schemas)=", "## Schemas", ""]
    for name, schema in sorted(document.get("components", {}).get("schemas", {}).items()):
        lines += _schema(name, schema)
    return "\n".join(lines)


def _operation(method: str, path: str, operation: dict[str, Any]) -> list[str]:
    lines = [f"### {code(f'{method.upper()} {path}')}", ""]
    summary = operation.get("summary", "")
    description = operation.get("description", "")
    if summary and not description:  # FastAPI names a route without one after its function
        description = summary if summary.endswith(".") else f"{summary}."
    if description:
        lines += [description, ""]
    parameters = operation.get("parameters", [])
    if parameters:
        lines += ["| parameter | in | type | what it is |", "| --- | --- | --- | --- |"]
        for param in parameters:
            required = " (required)" if param.get("required") else ""
            lines.append(
                f"| {code(param['name'])}{required} | {param['in']} | "
                f"{_type(param.get('schema', {}))} | {cell(param.get('description', ''))} |"
            )
        lines.append("")
    body = operation.get("requestBody")
    if body:
        for media, content in body.get("content", {}).items():
            lines += [f"Body ({code(media)}): {_type(content.get('schema', {}))}", ""]
    responses = operation.get("responses", {})
    if responses:
        lines += ["| status | what it means | body |", "| --- | --- | --- |"]
        for status, response in responses.items():
            bodies = [
                f"{code(media)} {_type(content.get('schema') or content.get('itemSchema') or {})}"
                for media, content in response.get("content", {}).items()
            ]
            lines.append(
                f"| {status} | {cell(response.get('description', ''))} | {'; '.join(bodies)} |"
            )
        lines.append("")
    return lines


def _schema(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"({_anchor(name)})=", f"### {code(name)}", ""]
    if schema.get("description"):
        lines += [" ".join(schema["description"].split()), ""]
    table = properties_table("field", schema, _type)
    if table:
        lines += table
    elif "enum" in schema:
        lines += ["One of " + ", ".join(code(str(value)) for value in schema["enum"]) + ".", ""]
    return lines


def _anchor(name: str) -> str:
    return "http-schema-" + "".join(c if c.isalnum() else "-" for c in name).lower()


def _type(schema: dict[str, Any]) -> str:
    """A schema as a short type: ``string``, ``array of ChatCitation`` (linked)."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{_anchor(name)})"
    for combinator in ("anyOf", "oneOf", "allOf"):
        if combinator in schema:
            return " or ".join(_type(option) for option in schema[combinator])
    kind = schema.get("type")
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if "const" in schema:
        return code(str(schema["const"]))
    if "enum" in schema:
        return " or ".join(code(str(value)) for value in schema["enum"])
    if kind == "object" and "additionalProperties" in schema:
        extra = schema["additionalProperties"]
        return f"object of {_type(extra) if isinstance(extra, dict) else 'any'}"
    return str(kind or "any")
