"""Loopback networking helpers shared by the benchmarks (and the tests)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A loopback TCP port nobody listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
