"""The OpenID Connect client: sign-in with the authorization code flow and PKCE, and the
provider's JWTs checked against its JWKS.

Every protocol step is a maintained library's: Authlib builds the authorization request
(state, nonce, S256 code challenge) and redeems the code at the token endpoint; joserfc
verifies signatures against the provider's keys, and Authlib's ``CodeIDToken`` checks an
ID token's claims (issuer, audience, expiry, nonce, ``azp``, ``at_hash``). Nothing here
parses or checks a token by hand. The provider's metadata and keys are cached; an unknown
key id fetches the keys again (at most once a minute), so a key rotation is followed.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx
from authlib.integrations.httpx_client import OAuth2Client
from authlib.oauth2.claims import JWTClaims
from authlib.oidc.core import CodeIDToken
from joserfc import jwt
from joserfc.errors import InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet

from superbiz.config import OidcSettings
from superbiz.exceptions import IdentityProviderError, SignInError

#: signature algorithms accepted (never ``none``, never a shared-secret HMAC)
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")
#: seconds of clock difference tolerated between the provider and this server
LEEWAY_S = 60
#: the provider's metadata is read again after this long
METADATA_TTL_S = 3600.0
#: keys are fetched again for an unknown key id at most this often
JWKS_REFRESH_S = 60.0


@dataclass(frozen=True, slots=True)
class Identity:
    """Who the provider says someone is."""

    subject: str
    name: str
    #: None when the provider sent no groups claim at all (the stored groups then stay)
    groups: tuple[str, ...] | None
    id_token: str | None = None


@dataclass(frozen=True, slots=True)
class AuthorizationRequest:
    """Where to send the browser, and what to keep until it comes back."""

    url: str
    state: str
    code_verifier: str
    nonce: str


def claim(claims: Mapping[str, Any], path: str) -> Any:
    """The claim at ``path``; dots walk into objects (``realm_access.roles``).

    >>> claim({"realm_access": {"roles": ["a"]}}, "realm_access.roles")
    ['a']
    >>> claim({"groups": ["x"]}, "missing") is None
    True
    """
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def groups_of(value: Any) -> tuple[str, ...] | None:
    """A groups claim as names: a list of strings, or one string (some providers send one
    group that way); None when absent.

    >>> groups_of(["a", "b", 3]), groups_of("solo"), groups_of(None)
    (('a', 'b'), ('solo',), None)
    """
    if value is None:
        return None
    if isinstance(value, str):
        return (value,) if value else ()
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value if isinstance(v, str) and v)
    return ()


class OidcClient:
    """One provider, as ``auth.oidc`` names it."""

    def __init__(self, settings: OidcSettings, transport: httpx.BaseTransport | None = None):
        if not settings.enabled:
            raise ValueError("auth.oidc needs issuer and client-id")
        self.settings = settings
        self.issuer = str(settings.issuer)
        self.client_id = str(settings.client_id)
        self.audience = tuple(settings.audience) or (self.client_id,)
        self._transport = transport
        self._lock = threading.Lock()
        self._metadata: dict[str, Any] | None = None
        self._metadata_at = 0.0
        self._keys: KeySet | None = None
        self._keys_at = 0.0

    # -- the provider's metadata and keys --------------------------------------------------
    def _get(self, url: str, **kwargs: Any) -> dict[str, Any]:
        try:
            with httpx.Client(timeout=self.settings.timeout_s, transport=self._transport) as http:
                response = http.get(url, **kwargs)
            response.raise_for_status()
            data = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise IdentityProviderError(f"the identity provider ({url}) failed: {exc}") from exc
        if not isinstance(data, dict):
            raise IdentityProviderError(f"the identity provider ({url}) sent no JSON object")
        return data

    def metadata(self) -> dict[str, Any]:
        """``/.well-known/openid-configuration``, cached for an hour; its issuer must be
        the one configured (OpenID Connect Discovery §4.3)."""
        with self._lock:
            fresh = time.monotonic() - self._metadata_at < METADATA_TTL_S
            if self._metadata is not None and fresh:
                return self._metadata
        data = self._get(f"{self.issuer}/.well-known/openid-configuration")
        if str(data.get("issuer", "")).rstrip("/") != self.issuer:
            raise IdentityProviderError(
                f"the provider's metadata names the issuer {data.get('issuer')!r}, not "
                f"{self.issuer!r} (auth.oidc.issuer must be exactly the provider's issuer)"
            )
        for endpoint in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
            if not isinstance(data.get(endpoint), str):
                raise IdentityProviderError(f"the provider's metadata has no {endpoint}")
        with self._lock:
            self._metadata, self._metadata_at = data, time.monotonic()
        return data

    def _key_set(self, refresh: bool = False) -> KeySet:
        with self._lock:
            recent = time.monotonic() - self._keys_at < JWKS_REFRESH_S
            if self._keys is not None and (not refresh or recent):
                return self._keys
        data = self._get(self.metadata()["jwks_uri"])
        try:
            keys = KeySet.import_key_set(data)  # type: ignore[arg-type]
        except (JoseError, ValueError, KeyError, TypeError) as exc:
            raise IdentityProviderError(f"the provider's keys (JWKS) are unreadable: {exc}") from (
                exc
            )
        with self._lock:
            self._keys, self._keys_at = keys, time.monotonic()
        return keys

    def _decode(self, token: str) -> jwt.Token:
        """``token``'s header and claims once its signature verifies with one of the
        provider's keys (fetched again once when it names a key not seen yet)."""
        for refresh in (False, True):
            keys = self._key_set(refresh)
            try:
                return jwt.decode(token, keys, algorithms=list(ALGORITHMS))
            except InvalidKeyIdError as exc:  # no key with that kid (yet)
                if refresh:
                    raise SignInError(f"the token names no key of the provider: {exc}") from exc
            except JoseError as exc:
                raise SignInError(f"the token does not verify: {exc.description or exc}") from exc
        raise AssertionError("unreachable")

    # -- the authorization code flow -------------------------------------------------------
    def _oauth(self, redirect_uri: str) -> OAuth2Client:
        metadata = self.metadata()
        methods = metadata.get("token_endpoint_auth_methods_supported") or []
        method = None
        if (
            self.settings.client_secret
            and "client_secret_basic" not in methods
            and ("client_secret_post" in methods)
        ):
            method = "client_secret_post"
        return OAuth2Client(
            client_id=self.client_id,
            client_secret=self.settings.client_secret or None,
            token_endpoint_auth_method=method,
            scope=" ".join(self.settings.scopes),
            redirect_uri=redirect_uri,
            code_challenge_method="S256",
            timeout=self.settings.timeout_s,
            transport=self._transport,
        )

    def authorization_request(self, redirect_uri: str) -> AuthorizationRequest:
        """The provider's sign-in URL for a new state, nonce and PKCE verifier."""
        verifier = secrets.token_urlsafe(48)
        nonce = secrets.token_urlsafe(24)
        state = secrets.token_urlsafe(24)
        with self._oauth(redirect_uri) as client:
            url, _ = client.create_authorization_url(
                self.metadata()["authorization_endpoint"],
                state=state,
                code_verifier=verifier,
                nonce=nonce,
            )
        return AuthorizationRequest(str(url), state, verifier, nonce)

    def redeem(self, code: str, redirect_uri: str, code_verifier: str, nonce: str) -> Identity:
        """The person a returning browser's ``code`` stands for: the code is redeemed with
        its PKCE verifier, the ID token verified (signature, issuer, audience, expiry,
        nonce), and name and groups read from it, else from the userinfo endpoint."""
        metadata = self.metadata()
        try:
            with self._oauth(redirect_uri) as client:
                token = client.fetch_token(
                    metadata["token_endpoint"],
                    grant_type="authorization_code",
                    code=code,
                    code_verifier=code_verifier,
                )
        except httpx.HTTPError as exc:
            raise IdentityProviderError(f"the provider's token endpoint failed: {exc}") from exc
        except Exception as exc:  # Authlib's OAuthError: the provider refused the code
            raise SignInError(
                f"the identity provider refused the sign-in: {exc}", "refused"
            ) from exc
        id_token = token.get("id_token")
        if not isinstance(id_token, str):
            raise SignInError("the identity provider sent no ID token (is `openid` in the scopes?)")
        decoded = self._decode(id_token)
        checked = CodeIDToken(
            decoded.claims,
            decoded.header,
            options={
                "iss": {"essential": True, "value": self.issuer},
                "aud": {"essential": True, "value": self.client_id},
                "nonce": {"essential": True, "value": nonce},
            },
            params={"nonce": nonce, "client_id": self.client_id, **token},
        )
        self._validate(checked, "ID token")
        claims: dict[str, Any] = dict(decoded.claims)
        if self._wants_userinfo(claims) and metadata.get("userinfo_endpoint"):
            info = self._get(
                metadata["userinfo_endpoint"],
                headers={"Authorization": f"Bearer {token.get('access_token', '')}"},
            )
            if info.get("sub") != claims.get("sub"):  # OpenID Connect Core §5.3.4
                raise SignInError("the provider's userinfo names another subject")
            claims = {**info, **claims}
        return self._identity(claims, id_token)

    def _wants_userinfo(self, claims: Mapping[str, Any]) -> bool:
        return (
            claim(claims, self.settings.username_claim) is None
            or claim(claims, self.settings.groups_claim) is None
        )

    # -- bearer tokens ---------------------------------------------------------------------
    def verify_bearer(self, token: str) -> Identity:
        """The person a JWT from this provider stands for: an ID token or an access token
        whose ``aud`` names ``auth.oidc.audience`` (default: the client id), signed by one
        of the provider's keys, issued by it, not expired."""
        decoded = self._decode(token)
        checked = JWTClaims(
            decoded.claims,
            decoded.header,
            options={
                "iss": {"essential": True, "value": self.issuer},
                "aud": {"essential": True, "values": list(self.audience)},
                "sub": {"essential": True},
                "exp": {"essential": True},
            },
        )
        self._validate(checked, "bearer token")
        return self._identity(dict(decoded.claims), None)

    @staticmethod
    def _validate(claims: JWTClaims, what: str) -> None:
        try:
            claims.validate(leeway=LEEWAY_S)
        except JoseError as exc:
            raise SignInError(f"the {what} is not valid: {exc.description or exc}") from exc

    def _identity(self, claims: Mapping[str, Any], id_token: str | None) -> Identity:
        subject = str(claims.get("sub") or "")
        name = next(
            (
                str(v)
                for v in (
                    claim(claims, self.settings.username_claim),
                    claims.get("email"),
                    subject,
                )
                if isinstance(v, str) and v.strip()
            ),
            "",
        )
        if not subject or not name:
            raise SignInError("the identity provider named nobody (no `sub` claim)")
        groups = groups_of(claim(claims, self.settings.groups_claim))
        return Identity(subject, name.strip(), groups, id_token)

    # -- signing out -----------------------------------------------------------------------
    def end_session_url(self, id_token: str | None, after: str) -> str | None:
        """Where to send the browser to sign out at the provider too (RP-Initiated
        Logout), when it offers that; None otherwise."""
        try:
            endpoint = self.metadata().get("end_session_endpoint")
        except IdentityProviderError:
            return None
        if not isinstance(endpoint, str):
            return None
        params: dict[str, str] = {"client_id": self.client_id, "post_logout_redirect_uri": after}
        if id_token:
            params["id_token_hint"] = id_token
        return f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(params)}"
