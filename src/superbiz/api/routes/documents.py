"""Documents: list, upload (ingested as ``superbiz ingest`` would), delete."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import PlainTextResponse
from starlette.datastructures import UploadFile as FormFile
from starlette.exceptions import HTTPException

from superbiz.api._reader import ReaderDep
from superbiz.api._threads import in_thread
from superbiz.api.deps import AuthDep, Authorized, ClientAddress, CurrentUser, DocumentsDep
from superbiz.api.errors import (
    INTERNAL,
    INVALID,
    NOT_FOUND,
    UNAUTHORIZED,
    documented_error,
    superbiz_errors,
)
from superbiz.api.responses.documents import Deleted, DocumentList, Uploaded
from superbiz.auth import audit
from superbiz.auth.audit import AuditLog
from superbiz.auth.principal import User
from superbiz.exceptions import ConflictError, NotFoundError

router = APIRouter(
    prefix="/api/documents",
    tags=["documents"],
    dependencies=Authorized,
    responses={**UNAUTHORIZED, **INTERNAL},
)

T = TypeVar("T")

#: the audit trail's reason for a request about a document its caller may not read
WITHHELD = "a document the caller may not read (answered as if it did not exist)"


async def _withholding(
    auth: AuditLog, user: User, address: str | None, function: Callable[..., T], *args: Any
) -> T:
    """``function(*args)`` in a thread; a refusal that withheld a document (answered 404
    or 409 in the words of any such path) is written to the audit trail first."""
    try:
        return await in_thread(function, *args)
    except (NotFoundError, ConflictError) as refusal:
        if refusal.withheld is not None:
            await in_thread(auth.denied, user.name, refusal.withheld, WITHHELD, address)
        raise


@router.get("")
async def documents(documents: DocumentsDep, reader: ReaderDep) -> DocumentList:
    """The documents the caller may read."""
    items = await in_thread(documents.readable, reader)
    return DocumentList(documents=items, count=len(items))


@router.post(
    "",
    status_code=201,
    responses={
        **documented_error(403, "`cross_origin`: a write from another site, without the key."),
        **documented_error(413, "`payload_too_large`: over ingest.max-file-bytes."),
        **documented_error(
            422,
            "`invalid_request` (also: more than one file), or `invalid_document` (binary, "
            "empty, not UTF-8, malformed frontmatter, unsupported type).",
        ),
        **documented_error(
            409,
            "`conflict`: a knowledge-base document has this path, or one the caller may not "
            "read (never replaced), or an earlier upload has (replaced only with `overwrite`); "
            "or `index_mismatch`.",
        ),
        **superbiz_errors(503),
    },
)
async def upload(
    request: Request,
    documents: DocumentsDep,
    user: CurrentUser,
    reader: ReaderDep,
    auth: AuthDep,
    address: ClientAddress,
    file: Annotated[UploadFile, File(description="A Markdown or text file.")],
    domain: Annotated[
        str | None, Form(description="Domain folder; default: general.", max_length=64)
    ] = None,
    overwrite: Annotated[
        bool, Form(description="Replace an earlier upload with the same path.")
    ] = False,
) -> Uploaded:
    """Store and ingest one document, as `superbiz ingest` would (metadata, domain)."""
    files = [v for _, v in (await request.form()).multi_items() if isinstance(v, FormFile)]
    if len(files) > 1:
        raise HTTPException(
            422, f"one file per request, and this one has {len(files)}: send each on its own"
        )
    limit = documents.max_file_bytes
    data = await file.read(limit + 1)
    if len(data) > limit:
        raise HTTPException(413, f"the file is over the {limit}-byte limit (ingest.max-file-bytes)")
    uploaded = await _withholding(
        auth.audit,
        user,
        address,
        documents.upload,
        file.filename or "",
        data,
        domain,
        overwrite,
        reader,
    )
    await in_thread(
        auth.audit.record,
        user.name,
        audit.UPLOAD,
        uploaded.document.path,
        {"status": uploaded.status, "bytes": len(data)},
        address,
    )
    return uploaded


@router.get(
    "/{document_id:path}",
    response_class=PlainTextResponse,
    responses={
        200: {"content": {"text/plain": {}}, "description": "The document's file."},
        **NOT_FOUND,
        **INVALID,
    },
)
async def document_text(
    document_id: str,
    documents: DocumentsDep,
    reader: ReaderDep,
    user: CurrentUser,
    auth: AuthDep,
    address: ClientAddress,
) -> PlainTextResponse:
    """The whole document (its id is its path), as the file it was ingested from: plain
    text, so a browser shows its Markdown and any HTML in it as text."""
    text = await _withholding(auth.audit, user, address, documents.text, document_id, reader)
    return PlainTextResponse(text, media_type="text/plain; charset=utf-8")


@router.delete(
    "/{document_id:path}",
    responses={**NOT_FOUND, **INVALID, **superbiz_errors(503)},
    response_model_exclude_none=True,
)
async def delete_document(
    document_id: str,
    documents: DocumentsDep,
    reader: ReaderDep,
    user: CurrentUser,
    auth: AuthDep,
    address: ClientAddress,
) -> Deleted:
    """Remove a document (its id is its path, e.g. `payment/refund.md`) from both
    stores and recompute its domain. An uploaded file is deleted too; a knowledge-base
    file stays, and so does its path: the next `superbiz ingest` brings it back, and no
    upload takes its path meanwhile (`note` says so)."""
    deleted = await _withholding(auth.audit, user, address, documents.delete, document_id, reader)
    await in_thread(
        auth.audit.record, user.name, audit.DELETE_DOCUMENT, deleted.deleted, None, address
    )
    return deleted
