"""People, their API keys and their browsers' sign-ins, in the relational store, so that
every replica knows the same people and a removal or sign-out holds everywhere at once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Engine, delete, select
from sqlalchemy.orm import Session

from superbiz.exceptions import ConflictError, NotFoundError
from superbiz.storage.models import (
    ApiKeyRow,
    PendingSignInRow,
    SignInRow,
    UserRow,
    utcnow,
)

#: ``last_seen_at`` / ``last_used_at`` are written at most this often per person
TOUCH_EVERY = timedelta(minutes=1)


@dataclass(frozen=True, slots=True)
class UserRecord:
    id: int
    name: str
    role: str
    groups: tuple[str, ...]
    subject: str | None
    created_at: datetime
    last_seen_at: datetime | None
    removed_at: datetime | None

    @property
    def removed(self) -> bool:
        return self.removed_at is not None


@dataclass(frozen=True, slots=True)
class KeyRecord:
    user_id: int
    prefix: str
    created_at: datetime
    last_used_at: datetime | None


@dataclass(frozen=True, slots=True)
class SignInRecord:
    user: UserRecord
    created_at: datetime
    expires_at: datetime
    last_seen_at: datetime
    id_token: str | None


@dataclass(frozen=True, slots=True)
class PendingSignIn:
    code_verifier: str
    nonce: str
    redirect_uri: str
    return_to: str
    created_at: datetime


def _user(row: UserRow) -> UserRecord:
    return UserRecord(
        row.id,
        row.name,
        row.role,
        tuple(row.groups or ()),
        row.subject,
        row.created_at,
        row.last_seen_at,
        row.removed_at,
    )


class UserRepository:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # -- people ------------------------------------------------------------------------
    def get(self, name: str) -> UserRecord | None:
        with Session(self.engine) as session:
            row = session.scalar(select(UserRow).where(UserRow.name == name))
            return _user(row) if row else None

    def all(self, *, removed: bool = False) -> list[UserRecord]:
        query = select(UserRow).order_by(UserRow.name)
        if not removed:
            query = query.where(UserRow.removed_at.is_(None))
        with Session(self.engine) as session:
            return [_user(r) for r in session.scalars(query)]

    def any_active(self) -> bool:
        query = select(UserRow.id).where(UserRow.removed_at.is_(None)).limit(1)
        with Session(self.engine) as session:
            return session.scalar(query) is not None

    def add(
        self, name: str, role: str, groups: Sequence[str], key_hash: str | None, prefix: str = ""
    ) -> UserRecord:
        """A new person (with a key when ``key_hash`` is given); a removed one comes back
        with the role and groups given. ``ConflictError`` when the name is taken."""
        with Session(self.engine) as session, session.begin():
            row = session.scalar(select(UserRow).where(UserRow.name == name))
            if row is not None and row.removed_at is None:
                raise ConflictError(f"there is already a user {name!r}")
            if row is None:
                row = UserRow(name=name, role=role, groups=list(groups))
                session.add(row)
            else:
                row.role, row.groups, row.removed_at = role, list(groups), None
            session.flush()
            if key_hash is not None:
                session.add(ApiKeyRow(user_id=row.id, key_hash=key_hash, prefix=prefix))
            return _user(row)

    def change(
        self, name: str, *, role: str | None = None, groups: Sequence[str] | None = None
    ) -> tuple[UserRecord, UserRecord]:
        """Set a person's role and/or groups; (before, after)."""
        with Session(self.engine) as session, session.begin():
            row = self._active(session, name)
            before = _user(row)
            if role is not None:
                row.role = role
            if groups is not None:
                row.groups = list(groups)
            session.flush()
            return before, _user(row)

    def remove(self, name: str) -> UserRecord:
        """Mark a person removed: their keys and sign-ins end at once; the row stays so a
        later sign-in with the provider is refused until an admin adds them back."""
        with Session(self.engine) as session, session.begin():
            row = self._active(session, name)
            row.removed_at = utcnow()
            session.execute(delete(ApiKeyRow).where(ApiKeyRow.user_id == row.id))
            session.execute(delete(SignInRow).where(SignInRow.user_id == row.id))
            return _user(row)

    def replace_keys(self, name: str, key_hash: str, prefix: str) -> UserRecord:
        """A person's keys replaced by one new key, in one transaction (rotation)."""
        with Session(self.engine) as session, session.begin():
            row = self._active(session, name)
            session.execute(delete(ApiKeyRow).where(ApiKeyRow.user_id == row.id))
            session.add(ApiKeyRow(user_id=row.id, key_hash=key_hash, prefix=prefix))
            return _user(row)

    def signed_in(
        self, name: str, subject: str, groups: Sequence[str] | None, default_role: str
    ) -> tuple[UserRecord, UserRecord | None]:
        """Record a sign-in with the identity provider: the person is created with
        ``default_role`` on first sight; ``groups`` (when the provider sent any) replace
        theirs; the role an admin gave them stays. Returns (after, before; before is None
        for a new person). ``ConflictError`` when the name belongs to another subject,
        ``PermissionError`` when the person was removed."""
        with Session(self.engine) as session, session.begin():
            row = session.scalar(select(UserRow).where(UserRow.name == name))
            before = _user(row) if row else None
            if row is None:
                row = UserRow(
                    name=name, role=default_role, groups=list(groups or ()), subject=subject
                )
                session.add(row)
            elif row.removed_at is not None:
                raise PermissionError(f"user {name!r} was removed by an administrator")
            else:
                if row.subject is not None and row.subject != subject:
                    raise ConflictError(
                        f"user {name!r} belongs to another account of the identity provider"
                    )
                row.subject = subject
                if groups is not None:
                    row.groups = list(groups)
            row.last_seen_at = utcnow()
            session.flush()
            return _user(row), before

    def keys(self, user_ids: Sequence[int]) -> list[KeyRecord]:
        query = select(ApiKeyRow).where(ApiKeyRow.user_id.in_(list(user_ids)))
        with Session(self.engine) as session:
            return [
                KeyRecord(r.user_id, r.prefix, r.created_at, r.last_used_at)
                for r in session.scalars(query.order_by(ApiKeyRow.id))
            ]

    def by_key(self, key_hash: str) -> UserRecord | None:
        """The active person whose key hashes to ``key_hash`` (its use noted)."""
        query = select(ApiKeyRow, UserRow).join(UserRow, UserRow.id == ApiKeyRow.user_id)
        with Session(self.engine) as session:
            found = session.execute(
                query.where(ApiKeyRow.key_hash == key_hash, UserRow.removed_at.is_(None))
            ).first()
            if found is None:
                return None
            key, row = found
            now = utcnow()
            if key.last_used_at is None or now - key.last_used_at > TOUCH_EVERY:
                key.last_used_at = row.last_seen_at = now
                session.commit()
            return _user(row)

    @staticmethod
    def _active(session: Session, name: str) -> UserRow:
        row = session.scalar(
            select(UserRow).where(UserRow.name == name, UserRow.removed_at.is_(None))
        )
        if row is None:
            raise NotFoundError(f"no user {name!r}")
        return row

    # -- browsers' sign-ins --------------------------------------------------------------
    def start_sign_in(
        self, token_hash: str, user_id: int, expires_at: datetime, id_token: str | None
    ) -> None:
        with Session(self.engine) as session, session.begin():
            # sign-ins past their lifetime that nobody came back with go now
            session.execute(delete(SignInRow).where(SignInRow.expires_at < utcnow()))
            session.add(
                SignInRow(
                    token_hash=token_hash,
                    user_id=user_id,
                    expires_at=expires_at,
                    id_token=id_token,
                )
            )

    def sign_in(self, token_hash: str, idle: timedelta) -> SignInRecord | None:
        """The live sign-in of a cookie's token: not expired, not idle past ``idle``, its
        person not removed; an ended one is deleted. Its last use is noted."""
        query = (
            select(SignInRow, UserRow)
            .join(UserRow, UserRow.id == SignInRow.user_id)
            .where(SignInRow.token_hash == token_hash)
        )
        now = utcnow()
        with Session(self.engine) as session:
            found = session.execute(query).first()
            if found is None:
                return None
            sign_in, row = found
            if (
                row.removed_at is not None
                or now >= sign_in.expires_at
                or (now - sign_in.last_seen_at > idle)
            ):
                session.delete(sign_in)
                session.commit()
                return None
            if now - sign_in.last_seen_at > TOUCH_EVERY:
                sign_in.last_seen_at = row.last_seen_at = now
                session.commit()
            return SignInRecord(
                _user(row),
                sign_in.created_at,
                sign_in.expires_at,
                sign_in.last_seen_at,
                sign_in.id_token,
            )

    def end_sign_in(self, token_hash: str) -> SignInRecord | None:
        """Sign a browser out; what its sign-in was (None: there was none)."""
        with Session(self.engine) as session, session.begin():
            found = session.execute(
                select(SignInRow, UserRow)
                .join(UserRow, UserRow.id == SignInRow.user_id)
                .where(SignInRow.token_hash == token_hash)
            ).first()
            if found is None:
                return None
            sign_in, row = found
            record = SignInRecord(
                _user(row),
                sign_in.created_at,
                sign_in.expires_at,
                sign_in.last_seen_at,
                sign_in.id_token,
            )
            session.delete(sign_in)
            return record

    # -- sign-ins on their way through the identity provider -----------------------------
    def add_pending(self, state_hash: str, pending: PendingSignIn, older: datetime) -> None:
        """Remember one authorization request; those begun before ``older`` are dropped."""
        with Session(self.engine) as session, session.begin():
            session.execute(delete(PendingSignInRow).where(PendingSignInRow.created_at < older))
            session.add(
                PendingSignInRow(
                    state_hash=state_hash,
                    code_verifier=pending.code_verifier,
                    nonce=pending.nonce,
                    redirect_uri=pending.redirect_uri,
                    return_to=pending.return_to,
                    created_at=pending.created_at,
                )
            )

    def take_pending(self, state_hash: str) -> PendingSignIn | None:
        """The authorization request of ``state``, once: a second callback finds none."""
        with Session(self.engine) as session, session.begin():
            row = session.get(PendingSignInRow, state_hash, with_for_update=True)
            if row is None:
                return None
            pending = PendingSignIn(
                row.code_verifier, row.nonce, row.redirect_uri, row.return_to, row.created_at
            )
            taken = session.execute(
                delete(PendingSignInRow).where(PendingSignInRow.state_hash == state_hash)
            )
            return pending if taken.rowcount else None  # type: ignore[attr-defined]
