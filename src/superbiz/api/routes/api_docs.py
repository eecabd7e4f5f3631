"""``/docs`` (Swagger UI) and ``/redoc`` from files shipped in the package.

FastAPI's own pages load their scripts from a CDN: on a network without internet they
are blank. These serve the same pages with ``swagger-ui-dist`` and ``redoc`` vendored
under ``static/vendor`` (versions and licences in ``static/vendor/VERSIONS.txt``).
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse

VENDOR = "/static/vendor"
OPENAPI_URL = "/openapi.json"
TITLE = "superbiz"

router = APIRouter(include_in_schema=False)


@router.get("/docs")
async def swagger_ui() -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url=OPENAPI_URL,
        title=f"{TITLE} — API docs",
        swagger_js_url=f"{VENDOR}/swagger-ui/swagger-ui-bundle.js",
        swagger_css_url=f"{VENDOR}/swagger-ui/swagger-ui.css",
        swagger_favicon_url=f"{VENDOR}/swagger-ui/favicon-32x32.png",
        oauth2_redirect_url="/docs/oauth2-redirect",
    )


@router.get("/docs/oauth2-redirect")
async def swagger_ui_redirect() -> HTMLResponse:
    return get_swagger_ui_oauth2_redirect_html()


@router.get("/redoc")
async def redoc() -> HTMLResponse:
    return get_redoc_html(
        openapi_url=OPENAPI_URL,
        title=f"{TITLE} — ReDoc",
        redoc_js_url=f"{VENDOR}/redoc/redoc.standalone.js",
        redoc_favicon_url=f"{VENDOR}/swagger-ui/favicon-32x32.png",
        with_google_fonts=False,
    )
