"""Sign-in with the team's OpenID Connect provider, sign-out, and who am I.

``GET /auth/login`` sends the browser to the provider (authorization code flow with PKCE;
state, nonce and verifier kept in the store, so any replica may receive it back);
``GET /auth/callback`` redeems the code, checks the ID token, sets the sign-in cookie
(HttpOnly, SameSite=Lax, Secure over https) and returns to the page — or, refused, to the
page's sign-in screen with a word saying why (``/?sign_in_error=removed``; the reason in
full is in the audit trail); ``POST /auth/logout`` ends the sign-in everywhere and names the
provider's own sign-out page when it has one.
"""

from __future__ import annotations

import logging
from typing import Annotated
from urllib.parse import urlencode, urlsplit

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response
from starlette.exceptions import HTTPException

from superbiz.api._threads import in_thread
from superbiz.api.deps import AuthDep, ClientAddress, CurrentUser
from superbiz.api.errors import INTERNAL, UNAUTHORIZED
from superbiz.api.responses.auth import Me, SignedOut
from superbiz.auth import audit
from superbiz.auth.authenticate import Authenticator
from superbiz.auth.oidc import OidcClient
from superbiz.auth.roles import capabilities
from superbiz.auth.sign_ins import COOKIE, LOGIN_COOKIE, PENDING_FOR
from superbiz.exceptions import IdentityProviderError, SignInError

log = logging.getLogger(__name__)

#: the sign-in routes are the browser's (redirects and a cookie), as the page is: not in /docs
router = APIRouter(tags=["sign-in"], responses=INTERNAL, include_in_schema=False)
#: who am I, for the page and for scripts (in /docs)
me_router = APIRouter(prefix="/api", tags=["sign-in"], responses=INTERNAL)

CALLBACK = "/auth/callback"


def _oidc(auth: Authenticator) -> OidcClient:
    if auth.oidc is None:
        raise HTTPException(404, "sign-in with an identity provider is not configured (auth.oidc)")
    return auth.oidc


def _redirect_uri(request: Request, auth: Authenticator) -> str:
    """Where the provider sends the browser back: ``auth.oidc.redirect-url``, else this
    server as the browser reached it (its Host already passed ``allowed-hosts``)."""
    configured = auth.settings.auth.oidc.redirect_url
    return configured or str(request.url.replace(path=CALLBACK, query="", fragment=""))


def _secure(request: Request, auth: Authenticator, redirect_uri: str) -> bool:
    configured = auth.settings.auth.cookie_secure
    if configured is not None:
        return configured
    return request.url.scheme == "https" or redirect_uri.startswith("https://")


def _local_path(target: str | None) -> str:
    """Where to go after signing in: a path on this server, never another site.

    >>> _local_path("/?tab=docs"), _local_path("//evil.example/x"), _local_path("https://e/")
    ('/?tab=docs', '/', '/')
    """
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    parts = urlsplit(target)
    return target if not parts.netloc and not parts.scheme else "/"


@router.get("/auth/login", status_code=302, response_class=RedirectResponse)
async def login(
    request: Request,
    auth: AuthDep,
    next: Annotated[str | None, Query(description="A path to return to.")] = None,
) -> RedirectResponse:
    """Send the browser to the identity provider to sign in."""
    oidc = _oidc(auth)
    redirect_uri = _redirect_uri(request, auth)
    started = await in_thread(auth.sign_ins.begin, oidc, redirect_uri, _local_path(next))
    response = RedirectResponse(started.url, status_code=302)
    response.set_cookie(
        LOGIN_COOKIE,
        started.state,
        max_age=int(PENDING_FOR.total_seconds()),
        path="/auth",
        httponly=True,
        samesite="lax",
        secure=_secure(request, auth, redirect_uri),
    )
    return response


@router.get(CALLBACK, status_code=302, response_class=RedirectResponse)
async def callback(
    request: Request,
    auth: AuthDep,
    address: ClientAddress,
    code: str | None = None,
    state: str | None = None,
    error: str | None = None,
    error_description: str | None = None,
) -> RedirectResponse:
    """Where the identity provider sends the browser back: the code is redeemed, the ID
    token checked, the sign-in cookie set, and the browser returned to the page."""
    oidc = _oidc(auth)
    if error or not code or not state:
        reason = f"the identity provider refused the sign-in: {error or 'no code and state'}"
        if error_description:
            reason += f" ({error_description})"
        await in_thread(
            auth.audit.record, "-", audit.SIGN_IN_REFUSED, None, {"reason": reason}, address
        )
        return _refused("refused")
    try:
        finished = await in_thread(
            auth.sign_ins.finish, oidc, state, request.cookies.get(LOGIN_COOKIE), code, address
        )
    except SignInError as exc:
        return _refused(exc.reason)
    except IdentityProviderError:
        log.warning("sign-in: the identity provider failed", exc_info=True)
        return _refused("provider")
    response = RedirectResponse(finished.return_to, status_code=302)
    response.delete_cookie(LOGIN_COOKIE, path="/auth")
    response.set_cookie(
        COOKIE,
        finished.token,
        max_age=int(auth.sign_ins.lifetime.total_seconds()),
        path="/",
        httponly=True,
        samesite="lax",
        secure=_secure(request, auth, _redirect_uri(request, auth)),
    )
    return response


def _refused(reason: str) -> RedirectResponse:
    """Back to the page's sign-in screen, saying why in one word (the page words it)."""
    response = RedirectResponse(f"/?{urlencode({'sign_in_error': reason})}", status_code=302)
    response.delete_cookie(LOGIN_COOKIE, path="/auth")
    return response


@router.post("/auth/logout")
async def logout(
    request: Request, response: Response, auth: AuthDep, address: ClientAddress
) -> SignedOut:
    """End this browser's sign-in on every replica; `end_session_url`, when the provider
    has one, signs out there too (the page goes there next)."""
    token = request.cookies.get(COOKIE)
    id_token = await in_thread(auth.sign_ins.end, token, address) if token else None
    response.delete_cookie(COOKIE, path="/")
    end = None
    if auth.oidc is not None and id_token is not None:
        home = str(request.url.replace(path="/", query="", fragment=""))
        end = await in_thread(auth.oidc.end_session_url, id_token or None, home)
    return SignedOut(signed_out=id_token is not None, end_session_url=end)


@me_router.get("/me", responses=UNAUTHORIZED)
async def me(user: CurrentUser) -> Me:
    """Who is asking: name, role, groups, how they proved it, what the page offers them."""
    return Me(
        name=user.name,
        role=user.role.label,
        groups=sorted(user.groups),
        via=user.via,
        can=capabilities(user.role),
    )
