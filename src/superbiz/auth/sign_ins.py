"""A browser's sign-in: the way through the identity provider (state, nonce and PKCE
verifier kept in the store, so the provider may send the browser back to any replica),
then a random token in an HttpOnly cookie whose SHA-256 names the sign-in's row.

A sign-in ends ``auth.session-hours`` after it began, after ``auth.session-idle-minutes``
without a request, when its person signs out, or when an admin removes them.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import NoReturn

from superbiz.auth import audit
from superbiz.auth.directory import UserDirectory
from superbiz.auth.keys import key_hash
from superbiz.auth.oidc import OidcClient
from superbiz.auth.principal import User
from superbiz.config import AuthSettings
from superbiz.exceptions import SignInError
from superbiz.storage.models import utcnow
from superbiz.storage.users import PendingSignIn

#: the sign-in cookie, and the one that ties a sign-in under way to its browser
COOKIE = "superbiz_session"
LOGIN_COOKIE = "superbiz_sign_in"
#: a sign-in under way must come back within this long
PENDING_FOR = timedelta(minutes=10)


@dataclass(frozen=True, slots=True)
class Started:
    """A sign-in sent to the provider: the URL, and the state its cookie keeps."""

    url: str
    state: str


@dataclass(frozen=True, slots=True)
class Finished:
    user: User
    token: str
    return_to: str


class SignIns:
    def __init__(self, directory: UserDirectory, settings: AuthSettings) -> None:
        self.directory = directory
        self.settings = settings

    @property
    def lifetime(self) -> timedelta:
        return timedelta(hours=self.settings.session_hours)

    def begin(self, oidc: OidcClient, redirect_uri: str, return_to: str) -> Started:
        request = oidc.authorization_request(redirect_uri)
        now = utcnow()
        self.directory.users.add_pending(
            key_hash(request.state),
            PendingSignIn(request.code_verifier, request.nonce, redirect_uri, return_to, now),
            older=now - PENDING_FOR,
        )
        return Started(request.url, request.state)

    def finish(
        self,
        oidc: OidcClient,
        state: str,
        browser_state: str | None,
        code: str,
        address: str | None,
    ) -> Finished:
        """The browser is back with ``code``: its ``state`` must be the one this browser
        started (``browser_state``, its cookie) and not used before; then the code is
        redeemed and the person signed in."""
        if not browser_state or not secrets.compare_digest(state, browser_state):
            self._refused(
                "the sign-in was started in another browser, or its cookie expired",
                address,
                "other_browser",
            )
        pending = self.directory.users.take_pending(key_hash(state))
        if pending is None or utcnow() - pending.created_at > PENDING_FOR:
            self._refused(
                "the sign-in expired or was already used; sign in again", address, "expired"
            )
        try:
            identity = oidc.redeem(code, pending.redirect_uri, pending.code_verifier, pending.nonce)
        except SignInError as exc:
            self._refused(str(exc), address, exc.reason)
        user = self.directory.signed_in(identity, "sign_in", address)
        token = secrets.token_urlsafe(32)
        assert user.user_id is not None
        self.directory.users.start_sign_in(
            key_hash(token), user.user_id, utcnow() + self.lifetime, identity.id_token
        )
        return Finished(user, token, pending.return_to)

    def _refused(self, reason: str, address: str | None, code: str) -> NoReturn:
        self.directory.audit.record("-", audit.SIGN_IN_REFUSED, None, {"reason": reason}, address)
        raise SignInError(reason, code)

    def resolve(self, token: str) -> User | None:
        """The person a cookie's token signs in, while the sign-in lasts."""
        idle = timedelta(minutes=self.settings.session_idle_minutes)
        record = self.directory.users.sign_in(key_hash(token), idle)
        return self.directory.user(record.user, "sign_in") if record else None

    def end(self, token: str, address: str | None) -> str | None:
        """Sign out; the ID token to hint the provider's own sign-out with (if any)."""
        record = self.directory.users.end_sign_in(key_hash(token))
        if record is None:
            return None
        self.directory.audit.record(record.user.name, audit.SIGN_OUT, None, None, address)
        return record.id_token or ""
