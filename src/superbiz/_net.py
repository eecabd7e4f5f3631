"""Loopback networking helpers shared by the benchmarks (and the tests)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable


def free_port() -> int:
    """A loopback TCP port nobody listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def connected_to_itself(sock: socket.socket) -> bool:
    """Whether ``sock`` is a TCP self-connection: its own address is its peer's.

    Connecting to a loopback port nobody listens on yet can succeed this way when the kernel
    happens to pick that very port as the connection's source (free ports and source ports
    come from the same ephemeral range), so a server seen "listening" by a bare connect may
    not have started at all.
    """
    try:
        return bool(sock.getsockname() == sock.getpeername())
    except OSError:
        return False


def accepts_connections(port: int, timeout_s: float = 0.5) -> bool:
    """Whether something listens on 127.0.0.1:``port`` (a self-connection is not a listener)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        return sock.connect_ex(("127.0.0.1", port)) == 0 and not connected_to_itself(sock)


def wait_listening(port: int, timeout_s: float, alive: Callable[[], bool]) -> bool:
    """True once 127.0.0.1:``port`` accepts connections; False on timeout or as soon as
    ``alive()`` says the process that should listen has exited."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and alive():
        if accepts_connections(port):
            return True
        time.sleep(0.1)
    return False
