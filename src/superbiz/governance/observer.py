"""A hook around each governed call, so that whatever watches the tool from outside
(the runtime's tracing, ``superbiz.agents.tracing``) needs no line inside it.

``LookupTurn.call`` hands its call to the lookup's observer, which runs it (``run``)
inside whatever it opens and names the trace the call's record keeps. Without one
(``UNOBSERVED``) a call just runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from superbiz.governance.results import Origin, ToolOutcome


@dataclass(frozen=True, slots=True)
class GovernedCall:
    """One call of the governed tool, as an observer sees it before it runs."""

    session_id: str
    turn: int
    step: int
    tool_name: str
    call_id: str
    origin: Origin


class CallObserver(Protocol):
    """Watches every governed call of a lookup, from outside the tool."""

    def around(self, call: GovernedCall, run: Callable[[], ToolOutcome]) -> ToolOutcome:
        """Run the call (``run``) and return its outcome."""
        ...

    def trace_id(self) -> str | None:
        """The trace the running call belongs to, for its record (None: none)."""
        ...


class _Unobserved:
    """No observer: the call runs as it is, and its record names no trace."""

    def around(self, call: GovernedCall, run: Callable[[], ToolOutcome]) -> ToolOutcome:
        return run()

    def trace_id(self) -> str | None:
        return None


UNOBSERVED: CallObserver = _Unobserved()
