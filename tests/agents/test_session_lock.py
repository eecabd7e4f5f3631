"""Turns of one session one at a time, in arrival order; other sessions never wait."""

from __future__ import annotations

import threading
import time

import pytest

from superbiz.agents.turn_order import LocalSessionLocks, SessionBusyError


def test_a_second_turn_waits_for_the_first_and_runs_after_it() -> None:
    locks = LocalSessionLocks(wait_s=30)
    order: list[str] = []
    first_inside = threading.Event()
    release_first = threading.Event()

    def first() -> None:
        with locks.hold("s1"):
            first_inside.set()
            release_first.wait(30)
            order.append("first")

    def second() -> None:
        with locks.hold("s1"):
            order.append("second")

    one = threading.Thread(target=first)
    one.start()
    assert first_inside.wait(30)
    two = threading.Thread(target=second)
    two.start()
    with locks.hold("other"):  # another session is not held up by the busy one
        order.append("other")
    release_first.set()
    one.join(30)
    two.join(30)
    assert order == ["other", "first", "second"]
    assert locks.queued("s1") == locks.queued("other") == 0  # nothing left behind


def test_waiters_are_served_in_arrival_order() -> None:
    locks = LocalSessionLocks(wait_s=30)
    served: list[int] = []

    def turn(n: int) -> None:
        with locks.hold("s1"):
            served.append(n)

    with locks.hold("s1"):
        threads = []
        for n in range(5):
            thread = threading.Thread(target=turn, args=(n,))
            thread.start()
            threads.append(thread)
            while locks.queued("s1") < n + 2:  # this one stands in line before the next
                time.sleep(0.001)
    for thread in threads:
        thread.join(30)
    assert served == [0, 1, 2, 3, 4]


def test_a_wait_past_the_bound_is_a_clear_busy_error() -> None:
    locks = LocalSessionLocks(wait_s=0)
    with locks.hold("s1"):
        with pytest.raises(SessionBusyError, match="'s1' is busy") as caught, locks.hold("s1"):
            pass
        assert caught.value.session_id == "s1"
        assert locks.queued("s1") == 1  # the refused request left the line
    assert locks.queued("s1") == 0
    with locks.hold("s1"):  # usable again once the turn ahead is done
        pass
