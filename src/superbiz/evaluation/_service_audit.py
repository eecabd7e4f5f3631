"""The audit of ``superbiz eval service``: every session it ran checked against what the
service recorded and answered (see ``superbiz.evaluation.service``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from superbiz.evaluation._service_load import REQUEST_TIMEOUT_S, SessionRun

#: errors quoted in the report, at most
ERROR_SAMPLES = 5


@dataclass(slots=True)
class Audit:
    """What went wrong over the sessions a benchmark ran (see the module docstring)."""

    sessions: int = 0
    lookups: int = 0
    invocation_mismatches: int = 0
    cap_overruns: int = 0
    leaks: int = 0
    second_turns: int = 0
    first_turn_forgotten: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.invocation_mismatches
            or self.cap_overruns
            or self.leaks
            or self.first_turn_forgotten
        )

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "problems": self.problems[:ERROR_SAMPLES], "ok": self.ok}

    def session(self, session: SessionRun, rows: list[dict[str, Any]]) -> None:
        """Check one session against its recorded ``rows``."""
        self.sessions += 1
        sid = session.session_id
        answers = [t.answer for t in session.turns if t.answer is not None]
        reported = [
            (a["turn"], lookup["arguments"], lookup["executed"])
            for a in answers
            for lookup in a["lookups"]
        ]
        stored = [(row["turn"], row["arguments"], row["executed"]) for row in rows]
        self.lookups += len(reported)
        if reported != stored:
            self.invocation_mismatches += 1
            self.problems.append(f"{sid}: {len(reported)} lookups answered, {len(stored)} stored")
        seen: set[str] = set()  # documents this session was shown in earlier turns
        for turn in session.turns:
            if turn.event_sessions - {sid}:
                self.leaks += 1
                self.problems.append(f"{sid}: events of {sorted(turn.event_sessions - {sid})}")
            if turn.answer is not None:
                self._turn(sid, turn.answer, seen)

    def _turn(self, sid: str, answer: dict[str, Any], seen: set[str]) -> None:
        number = answer["turn"]
        executed = sum(lookup["executed"] for lookup in answer["lookups"])
        if executed > answer["high_mark"]:
            self.cap_overruns += 1
            self.problems.append(f"{sid} turn {number}: {executed} lookups executed")
        shown = {path for lookup in answer["lookups"] for path in lookup["documents"]}
        foreign = {c["path"] for c in answer["citations"]} - seen - shown
        if answer["session_id"] != sid or foreign:
            self.leaks += 1
            self.problems.append(f"{sid} turn {number}: cites {sorted(foreign)}")
        if number > 1 and seen:
            self.second_turns += 1
            if shown & seen:
                self.first_turn_forgotten += 1
                self.problems.append(f"{sid} turn {number}: shown again {sorted(shown & seen)}")
        seen |= shown


async def audit(urls: list[str], headers: dict[str, str], sessions: list[SessionRun]) -> Audit:
    """Each session checked against its recorded calls, read from the replicas in turn."""
    checked = Audit()
    async with httpx.AsyncClient(headers=headers, timeout=REQUEST_TIMEOUT_S) as client:
        for k, session in enumerate(sessions):
            url = urls[k % len(urls)]
            response = await client.get(f"{url}/api/sessions/{session.session_id}/invocations")
            rows = response.json()["invocations"] if response.status_code == 200 else []
            checked.session(session, rows)
    return checked
