"""Writing the audit trail: one row per sign-in, upload, delete, change to a person, and
refused request. A refused request repeated by the same caller (a script with a wrong key
in a loop) is written once a minute, not once a request."""

from __future__ import annotations

import threading
import time
from typing import Any

from sqlalchemy import Engine

from superbiz.storage.audit import AuditEvent, AuditRepository

#: the actions the trail records
SIGN_IN = "sign_in"
SIGN_IN_REFUSED = "sign_in_refused"
SIGN_OUT = "sign_out"
UPLOAD = "upload"
DELETE_DOCUMENT = "delete_document"
USER_ADDED = "user_added"
USER_REMOVED = "user_removed"
ROLE_CHANGED = "role_changed"
GROUPS_CHANGED = "groups_changed"
KEY_ROTATED = "key_rotated"
DENIED = "denied"

#: seconds within which the same refusal of the same caller is not written again
DENIED_EVERY_S = 60.0


class AuditLog:
    def __init__(self, engine: Engine) -> None:
        self.events = AuditRepository(engine)
        self._lock = threading.Lock()
        self._denied: dict[tuple[str, str, str], float] = {}

    def record(
        self,
        actor: str,
        action: str,
        target: str | None = None,
        detail: dict[str, Any] | None = None,
        address: str | None = None,
    ) -> None:
        self.events.record(actor, action, target, detail, address)

    def denied(self, actor: str, target: str, reason: str, address: str | None = None) -> bool:
        """Record a refused request, unless the same one was recorded within a minute;
        whether it was written."""
        key = (actor, target, reason)
        now = time.monotonic()
        with self._lock:
            if now - self._denied.get(key, -DENIED_EVERY_S) < DENIED_EVERY_S:
                return False
            self._denied[key] = now
            if len(self._denied) > 10_000:  # forget the old ones rather than grow
                self._denied = {k: t for k, t in self._denied.items() if now - t < DENIED_EVERY_S}
        self.record(actor, DENIED, target, {"reason": reason}, address)
        return True

    def read(self, **filters: Any) -> list[AuditEvent]:
        return self.events.events(**filters)
