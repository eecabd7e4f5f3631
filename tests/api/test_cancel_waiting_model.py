"""A cancel reaches a model call that is waiting for its server: cancelling a turn one
second into a 6 s model call ended it only after 10–11 s (it waited for the answer, and
for the next call). The fake OpenAI server here takes 30 s to answer; the turn must end
while that answer is still being waited for, streamed or not."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable

import httpx
import pytest

from fakes.openai_server import FakeOpenAIServer, error_reply, text_reply
from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.api import create_app
from superbiz.config import LLMSettings
from superbiz.evaluation._service_server import LiveServer
from superbiz.llm import OpenAIChatModel

#: far longer than the turn may take once cancelled
MODEL_DELAY_S = 30.0


@pytest.mark.parametrize("route", ["/api/chat", "/api/chat_stream"])
def test_a_cancel_ends_a_turn_whose_model_call_is_still_waiting(
    make_assistant: Callable[..., Runtime], route: str
) -> None:
    with FakeOpenAIServer() as fake:
        fake.script_chat(
            error_reply(400, "planner off"), text_reply("迟到的回答。", delay_s=MODEL_DELAY_S)
        )
        base = make_assistant()
        # retries on: a cancelled request must not be taken for a failure and retried
        llm = LLMSettings(base_url=fake.base_url, model="fake-model", max_retries=2, timeout_s=60)
        settings = base.settings.model_copy(update={"llm": llm})
        runtime = open_runtime(settings, kb=base.kb, model=OpenAIChatModel(llm))
        session = f"cancel-{uuid.uuid4().hex[:10]}"
        answered: list[httpx.Response] = []
        with (
            LiveServer(create_app(settings, assistant=runtime)) as server,
            httpx.Client(base_url=server.url, timeout=90) as http,
        ):
            body = {"session_id": session, "question": "支付回调超时怎么办？"}
            turn = threading.Thread(target=lambda: answered.append(http.post(route, json=body)))
            turn.start()
            waited_until = time.monotonic() + 60
            while len(fake.chat_requests) < 2 and time.monotonic() < waited_until:
                time.sleep(0.05)  # the answer's model call has been sent and is waiting
            assert len(fake.chat_requests) == 2
            cancelled = http.post("/api/chat/cancel", json={"session_id": session})
            assert cancelled.json() == {"session_id": session, "cancelled": True}
            turn.join(timeout=MODEL_DELAY_S / 2)
            assert not turn.is_alive(), "the turn waited for the model's answer"
            assert fake.recorded[-1].status == 0  # the model had not answered yet
            [response] = answered
            if route == "/api/chat":
                assert response.status_code == 409
                assert response.json()["error"] == "turn_cancelled"
            else:
                events = response.text.split("\n\n")
                error = next(e for e in events if e.startswith("event: error"))
                assert json.loads(error.split("data: ", 1)[1])["error"] == "turn_cancelled"
            assert len(fake.chat_requests) == 2  # no retry, no further call
            assert http.get(f"/api/sessions/{session}").status_code == 404  # nothing stored
