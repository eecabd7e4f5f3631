"""Who a request comes from: the admin key, a person's API key, a provider's JWT, or a
browser's sign-in cookie; and whether the service asks at all.

Sign-in is required as soon as the service has any way to tell people apart:
``service.api-key``, ``auth.oidc``, or anyone added with ``superbiz users add``. Without
any of them it serves as it always did: everyone is the one local user.
"""

from __future__ import annotations

import hmac
import threading
import time

from sqlalchemy import Engine

from superbiz.auth.audit import AuditLog
from superbiz.auth.directory import UserDirectory
from superbiz.auth.keys import is_user_key
from superbiz.auth.oidc import OidcClient
from superbiz.auth.ownership import SessionGate
from superbiz.auth.principal import User, admin_key_user
from superbiz.auth.sign_ins import SignIns
from superbiz.config import Settings
from superbiz.exceptions import SignInError
from superbiz.storage.session_owners import SessionOwners

#: how long "does anyone exist" is trusted before the store is asked again
PEOPLE_CHECK_S = 5.0


class Authenticator:
    """The identity side of the HTTP service and of MCP over HTTP (one per process)."""

    def __init__(self, settings: Settings, engine: Engine, oidc: OidcClient | None = None):
        self.settings = settings
        self.api_key = settings.service.api_key or None
        self.audit = AuditLog(engine)
        self.directory = UserDirectory(engine, settings.auth, self.audit)
        self.sign_ins = SignIns(self.directory, settings.auth)
        self.sessions = SessionGate(SessionOwners(engine))
        if oidc is None and settings.auth.oidc.enabled:
            oidc = OidcClient(settings.auth.oidc)
        self.oidc = oidc
        self._lock = threading.Lock()
        self._people: tuple[float, bool] = (-PEOPLE_CHECK_S, False)

    @property
    def mode(self) -> str:
        """``oidc``, ``key`` (API keys only) or ``none`` (nobody is asked)."""
        if self.oidc is not None:
            return "oidc"
        return "key" if self.required() else "none"

    def required(self) -> bool:
        """Whether every request must say who it is."""
        if self.api_key or self.oidc is not None:
            return True
        with self._lock:
            checked, anyone = self._people
        if time.monotonic() - checked < PEOPLE_CHECK_S:
            return anyone
        anyone = self.directory.users.any_active()
        with self._lock:
            self._people = (time.monotonic(), anyone)
        return anyone

    def authenticate(
        self, credential: str | None, cookie: str | None, address: str | None = None
    ) -> User | None:
        """The person behind a request's ``X-API-Key`` / ``Authorization: Bearer``
        (``credential``) or sign-in cookie; None when it carries neither. A credential
        that proves nobody is a ``SignInError`` (a stale cookie is just no sign-in)."""
        if credential:
            return self._credential(credential, address)
        if cookie:
            return self.sign_ins.resolve(cookie)
        return None

    def _credential(self, credential: str, address: str | None) -> User:
        if self.api_key and hmac.compare_digest(credential.encode(), self.api_key.encode()):
            return admin_key_user()
        if is_user_key(credential):
            user = self.directory.by_key(credential)
            if user is None:
                raise SignInError("unknown or revoked API key")
            return user
        if self.oidc is not None and credential.count(".") == 2:
            identity = self.oidc.verify_bearer(credential)
            return self.directory.refresh_from_bearer(identity, address)
        raise SignInError("missing or wrong API key: send it as X-API-Key or Authorization: Bearer")
