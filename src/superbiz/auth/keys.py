"""Per-person API keys: ``sbz_`` + 43 characters of a 256-bit random secret.

Only the SHA-256 of a key is stored. A key carries 256 bits of randomness, so a fast hash
is enough (guessing one is as hopeless as guessing the key; a slow password hash would
only slow every request); it is what GitHub and others do with their tokens.
"""

from __future__ import annotations

import hashlib
import secrets

KEY_PREFIX = "sbz_"
#: characters of a key shown in lists, to tell keys apart
SHOWN = 12


def new_key() -> str:
    """A fresh key, to be printed once."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def key_hash(key: str) -> str:
    """What is stored of ``key`` (and of a sign-in cookie's token)."""
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


def shown(key: str) -> str:
    """The beginning of ``key``, safe to list.

    >>> shown("sbz_abcdefghijklmnop")
    'sbz_abcdefgh'
    """
    return key[:SHOWN]


def is_user_key(token: str) -> bool:
    """Whether ``token`` has the shape of a person's key (not a JWT, not the admin key)."""
    return token.startswith(KEY_PREFIX) and len(token) > len(KEY_PREFIX) + 16
