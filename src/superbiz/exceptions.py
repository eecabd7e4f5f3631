"""Errors for the caller.

Signals meant for the model (a blocked or deduplicated lookup) are not exceptions:
they are ordinary results with a level and a reason, see ``superbiz.governance``.
"""

from __future__ import annotations


class SuperbizError(Exception):
    """Base of every error superbiz raises on purpose."""


class ConfigError(SuperbizError):
    """Settings are missing, malformed or contradictory."""


class DocumentError(SuperbizError):
    """A file cannot become a knowledge document; the reason says why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class _Withholding(Exception):
    """``withheld``: the path of a document that exists but the caller may not read. The
    caller is told only what the message says (the same words as for any such path); the
    service writes the refusal to the audit trail."""

    def __init__(self, message: str, *, withheld: str | None = None) -> None:
        super().__init__(message)
        self.withheld = withheld


class NotFoundError(_Withholding, LookupError):
    """A document, session or source the caller named does not exist (→ 404)."""


class ConflictError(_Withholding, Exception):
    """A change would replace a document it must not, or not without asking (→ 409)."""


class SignInError(SuperbizError):
    """Credentials that prove nobody: a wrong or revoked key, a token that does not verify,
    a sign-in the identity provider or the checks refused (→ 401). ``reason`` is a word the
    page turns into a sentence (``refused``, ``other_browser``, ``expired``, ``removed``,
    ``taken``, ``invalid``), never text from the request."""

    def __init__(self, message: str, reason: str = "invalid") -> None:
        super().__init__(message)
        self.reason = reason


class ForbiddenError(SuperbizError):
    """Someone known asked for what their role may not do (→ 403)."""


class IdentityProviderError(SuperbizError):
    """The OpenID Connect provider could not be reached or answered nonsense (→ 502)."""


class SourceError(SuperbizError):
    """A source cannot be synced: a Git URL or branch that does not exist, a remote that
    cannot be reached, a folder that is not in the repository. Nothing was changed."""


class EmbeddingError(SuperbizError):
    """The embedder failed or returned something unusable."""


class IndexMismatchError(SuperbizError):
    """The vector index was built with a different embedder or dimension."""


class StoreError(SuperbizError):
    """The relational store or the vector store is unreachable or inconsistent."""


class SessionBusyError(SuperbizError):
    """The session's turn ahead did not finish within the wait (→ 409)."""

    def __init__(self, session_id: str, waited_s: float) -> None:
        super().__init__(
            f"session {session_id!r} is busy: another turn of it is still running after "
            f"{waited_s:g} s; send the next message when that one is answered"
        )
        self.session_id = session_id
        self.waited_s = waited_s


class QuestionError(SuperbizError):
    """A question that cannot be asked as written (empty, or longer than a turn takes)."""


class TurnCancelledError(SuperbizError):
    """The caller stopped a running turn (the client of a stream went away, or asked to
    cancel): a caller's decision, not a model failure; the turn is undone like a failed one."""


class UnknownDomainError(SuperbizError):
    """A lookup named a domain the knowledge base does not have."""

    def __init__(self, domain: str, known: list[str]) -> None:
        known_text = ", ".join(known) if known else "none yet: ingest documents first"
        super().__init__(f"unknown domain {domain!r}; known domains: {known_text}")
        self.domain = domain
        self.known = known


class LLMError(SuperbizError):
    """The chat model failed in a way the caller must handle."""


class LLMUnavailableError(LLMError):
    """The LLM endpoint cannot be reached or keeps failing after retries."""


class LLMTimeoutError(LLMUnavailableError):
    """A model call or the whole turn ran past its deadline (``llm.timeout-s``,
    ``llm.turn-timeout-s``)."""


class LLMResponseError(LLMError):
    """The LLM endpoint answered with something that is not a usable response."""


class StructuredOutputError(LLMError):
    """The model gave no reply matching the requested schema, even after one repair turn."""


def first_line(exc: BaseException) -> str:
    """An error's first line, for one-line messages: the driver's own error when
    SQLAlchemy wraps one, else the error's text, else its type."""
    lines = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
