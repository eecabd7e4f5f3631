"""What may name a session: one rule for every way in (the API, MCP, the command line),
so that a session made by one is reachable from the others, and refused before any store
sees it (PostgreSQL's columns are ``SESSION_ID_MAX`` wide; SQLite took any length)."""

from __future__ import annotations

import re

#: the ``session_id`` columns' width
SESSION_ID_MAX = 128
#: a session id is a path parameter of the API (``/api/sessions/{id}``): no control
#: character, no slash or backslash
SESSION_ID_PATTERN = r"^[^\x00-\x1f\x7f/\\]+$"


def session_id_problem(session_id: str) -> str | None:
    r"""Why ``session_id`` cannot name a session (None: it can), for the caller to say
    after the name it gave it (``--session``, ``'session_id'``).

    >>> session_id_problem("ask-1f3a9c2e"), session_id_problem(" "), session_id_problem("a/b")
    (None, 'must not be blank', "must not hold a control character, '/' or '\\'")
    """
    if not session_id.strip():
        return "must not be blank"
    if len(session_id) > SESSION_ID_MAX:
        return f"is longer than {SESSION_ID_MAX} characters"
    if not re.fullmatch(SESSION_ID_PATTERN, session_id):
        return "must not hold a control character, '/' or '\\'"
    return None
