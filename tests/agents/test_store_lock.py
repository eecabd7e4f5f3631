"""The store lock: held by a turn, set aside while its model answers, re-entrant."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from superbiz.agents.store_access import ReleasingModel, StoreLock
from superbiz.config import Settings, VectorSettings
from superbiz.llm.base import ResponseDone, StreamEvent, TextDelta
from superbiz.llm.messages import AssistantMessage, ChatResponse, Message, ToolSpec


class Probe:
    """A model that reports whether another thread could take the lock while it answers."""

    name = "probe"

    def __init__(self, lock: StoreLock) -> None:
        self.lock = lock
        self.free_while_answering: list[bool] = []

    def _free(self) -> bool:
        taken: list[bool] = []

        def other() -> None:
            try:
                with self.lock.held(timeout=0):
                    taken.append(True)
            except TimeoutError:
                taken.append(False)

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        return taken[0]

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> ChatResponse:
        self.free_while_answering.append(self._free())
        return ChatResponse(AssistantMessage("ok"), None, "stop")

    def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()
    ) -> Iterator[StreamEvent]:
        for piece in ("o", "k"):
            self.free_while_answering.append(self._free())
            yield TextDelta(piece)
        yield ResponseDone(ChatResponse(AssistantMessage("ok"), None, "stop"))


def test_a_model_answers_outside_the_lock_and_the_turn_gets_it_back() -> None:
    lock = StoreLock()
    probe = Probe(lock)
    model = lock.releasing(probe)
    assert isinstance(model, ReleasingModel) and model.name == "probe"
    with lock.held(), lock.held():  # re-entrant: a service method calling into the runtime
        assert model.complete([]).message.content == "ok"
        assert probe._free() is False  # held again after the call
        events = list(model.stream([]))
        assert probe._free() is False
    assert probe.free_while_answering == [True, True, True]
    assert isinstance(events[-1], ResponseDone)
    assert probe._free() is True


def test_an_abandoned_stream_leaves_the_lock_held_by_its_turn() -> None:
    lock = StoreLock()
    probe = Probe(lock)
    with lock.held():
        stream = lock.releasing(probe).stream([])
        assert next(stream) == TextDelta("o")
        stream.close()
        assert probe._free() is False
    assert probe._free() is True


def test_a_busy_lock_times_out_with_a_message() -> None:
    lock = StoreLock()
    with pytest.raises(TimeoutError, match="stayed busy for 0 s"):
        inside = threading.Event()
        done = threading.Event()

        def hold() -> None:
            with lock.held():
                inside.set()
                done.wait(30)

        thread = threading.Thread(target=hold)
        thread.start()
        inside.wait(30)
        try:
            with lock.held(timeout=0):
                pass
        finally:
            done.set()
            thread.join()


def test_only_embedded_stores_are_locked(tmp_path: Path) -> None:
    assert StoreLock.for_settings(Settings(data_dir=tmp_path)).enabled
    servers = Settings(
        data_dir=tmp_path,
        database_url="postgresql+psycopg://u@db/superbiz",
        vector=VectorSettings(uri="http://milvus:19530"),
    )
    lock = StoreLock.for_settings(servers)
    assert not lock.enabled
    probe = Probe(lock)
    assert lock.releasing(probe) is probe  # nothing to release
    with lock.held():
        assert probe._free() is True
