"""``/docs`` documents every response (typed 2xx bodies, stream events, JSON errors),
and what is served matches it."""

from __future__ import annotations

import uuid
from dataclasses import fields
from typing import Any

import pytest
from fastapi.testclient import TestClient

from superbiz.agents.runtime import Runtime
from superbiz.api.responses.chat import TURN_EVENTS
from superbiz.governance.results import RetrievalDetails
from superbiz.storage.invocations import Invocation

REF = "#/components/schemas/"


@pytest.fixture(scope="module")
def document(chat_app: Any) -> dict[str, Any]:
    response = TestClient(chat_app).get("/openapi.json")
    assert response.status_code == 200
    return dict(response.json())


def operations(document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{method.upper()} {path}", operation)
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    ]


def model_of(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """The component ``schema`` refers to; it must be an object with named properties."""
    ref = schema.get("$ref", "")
    assert ref.startswith(REF), f"not a model reference: {schema}"
    model = document["components"]["schemas"][ref.removeprefix(REF)]
    assert model.get("type") == "object" and model.get("properties"), ref
    return dict(model)


def test_every_route_has_a_typed_success_body(document: dict[str, Any]) -> None:
    seen = set()
    for name, operation in operations(document):
        success = {s: r for s, r in operation["responses"].items() if s.startswith("2")}
        assert len(success) == 1, name
        content = next(iter(success.values()))["content"]
        for media_type, body in content.items():
            if media_type == "application/json":
                model_of(document, body["schema"])
            elif media_type == "text/event-stream":
                for event in body["itemSchema"]["oneOf"]:
                    model_of(document, event["properties"]["data"]["contentSchema"])
            else:
                assert media_type in ("text/plain", "application/yaml"), name
                assert body["schema"] == {"type": "string"}, name
        seen.add(name)
    assert {
        "POST /api/chat",
        "POST /api/chat_stream",
        "POST /api/chat/clear",
        "GET /api/sessions/{session_id}",
        "GET /api/sessions/{session_id}/invocations",
        "GET /api/documents",
        "POST /api/documents",
        "DELETE /api/documents/{document_id}",
        "GET /api/knowledge/map",
        "GET /api/info",
        "GET /healthz",
        "GET /metrics",
    } <= seen


def test_error_responses_are_documented_as_the_error_body(document: dict[str, Any]) -> None:
    for name, operation in operations(document):
        errors = {s: r for s, r in operation["responses"].items() if s[0] in "45"}
        assert "500" in errors, name
        for status, response in errors.items():
            schema = response["content"]["application/json"]["schema"]
            if name == "GET /healthz" and status == "503":
                assert schema == {"$ref": f"{REF}Health"}
            else:
                assert schema == {"$ref": f"{REF}ErrorBody"}, (name, status)
    writes = [op for name, op in operations(document) if name.split()[0] in ("POST", "DELETE")]
    assert all("401" in op["responses"] for op in writes)
    assert "HTTPValidationError" not in document["components"]["schemas"]


def test_every_reference_resolves(document: dict[str, Any]) -> None:
    def refs(node: Any) -> list[str]:
        if isinstance(node, dict):
            found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
            return found + [r for value in node.values() for r in refs(value)]
        if isinstance(node, list):
            return [r for value in node for r in refs(value)]
        return []

    names = set(document["components"]["schemas"])
    assert {r.removeprefix(REF) for r in refs(document)} <= names


def test_streamed_events_carry_their_documented_fields(
    client: TestClient, document: dict[str, Any], sse_events: Any
) -> None:
    models = {model.event_name: model for model in TURN_EVENTS}
    response = client.post(
        "/api/chat_stream",
        json={"session_id": f"t-{uuid.uuid4().hex[:10]}", "question": "支付回调超时怎么办？"},
    )
    events = sse_events(response.text)
    assert {"plan", "tool_call", "tool_result", "token", "answer", "done"} <= {
        name for name, _, _ in events
    }
    for name, data, _ in events:
        schema = document["components"]["schemas"][models[name].__name__]
        assert set(schema.get("required", [])) <= data.keys() <= schema["properties"].keys()


def test_a_malformed_call_is_served_as_recorded(
    client: TestClient, chat_assistant: Runtime
) -> None:
    session = f"t-{uuid.uuid4().hex[:10]}"
    chat_assistant.invocations.add(
        Invocation(
            session_id=session,
            turn=1,
            step=1,
            tool_name="lookup_knowledge",
            arguments={},
            domain=None,
            relevance_level=None,
            dedup_reason=None,
            retrieval_details=None,
            executed=False,
            verdict="error",
            water_level="low",
            latency_ms=0.1,
            error="query is required",
        )
    )
    response = client.get(f"/api/sessions/{session}/invocations")
    assert response.status_code == 200, response.text
    (call,) = response.json()["invocations"]
    assert call["verdict"] == "error" and call["error"] == "query is required"
    assert call["retrieval_details"] is None and call["relevance_level"] is None


def test_the_recorded_scores_document_every_key_a_lookup_records(
    document: dict[str, Any],
) -> None:
    """Every field of ``RetrievalDetails``, in its order, each optional (an older record
    lacks later fields), with a string enum documented as the string it is stored as."""
    schema = document["components"]["schemas"]["RetrievalRecord"]
    properties = schema["properties"]
    assert list(properties) == [f.name for f in fields(RetrievalDetails)]
    assert "required" not in schema and schema["additionalProperties"] is True
    assert all({"type": "null"} in p["anyOf"] for p in properties.values())
    assert properties["dedup_reason"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert properties["widened"]["anyOf"] == [{"type": "boolean"}, {"type": "null"}]
    assert properties["l1_scores"]["anyOf"][0] == {
        "items": {"anyOf": [{"type": "number"}, {"type": "null"}]},
        "type": "array",
    }
