"""Debian's Chromium for the browser tests: where it is, how it starts on a closed
network, and how a test says it cannot run (skips, or fails under CI's
``SUPERBIZ_TEST_REQUIRE_SERVICES=1``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

CHROMIUM = Path("/usr/bin/chromium")
#: as root, headless, and without the background requests a closed network refuses
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
# Read at import: the shared fixtures remove every SUPERBIZ_* variable before tests run.
REQUIRE_SERVICES = os.environ.get("SUPERBIZ_TEST_REQUIRE_SERVICES") == "1"


def missing(reason: str) -> NoReturn:
    """Skip for ``reason``, or fail where CI requires every service."""
    if REQUIRE_SERVICES:
        pytest.fail(f"{reason} (SUPERBIZ_TEST_REQUIRE_SERVICES=1)")
    pytest.skip(reason)
