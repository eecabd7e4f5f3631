"""What every relational store keeps as written.

PostgreSQL refuses NUL (U+0000) in text columns and in JSON, where SQLite keeps it: a
model's answer or tool arguments with one failed the turn on PostgreSQL as a store
outage. Text a model wrote is therefore stored without NUL on both stores (it means
nothing in text); names that identify a row (session ids, paths) are never changed
here: the API refuses them before they reach a store.
"""

from __future__ import annotations

from typing import Any

NUL = "\x00"


def without_nul(value: Any) -> Any:
    """``value`` (text, or JSON made of dicts, lists and scalars) with every NUL removed.

    >>> without_nul({"query": "a\\x00b", "k\\x00": [1, "c\\x00"]})
    {'query': 'ab', 'k': [1, 'c']}
    """
    if isinstance(value, str):
        return value.replace(NUL, "") if NUL in value else value
    if isinstance(value, dict):
        return {without_nul(key): without_nul(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [without_nul(item) for item in value]
    return value
