"""Waiting for a loopback server: a TCP self-connection is not a listener."""

from __future__ import annotations

import socket
import threading

from superbiz._net import accepts_connections, connected_to_itself, free_port, wait_listening


def test_a_connection_to_the_port_it_came_from_is_seen_as_no_listener() -> None:
    # What a bare connect to a not-yet-listening port can hit when the kernel picks that
    # very port as the source: here forced by binding the source port first.
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        assert sock.connect_ex(("127.0.0.1", port)) == 0  # "connected", nobody listens
        assert connected_to_itself(sock)


def test_a_listener_is_seen_and_a_free_port_is_not() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert accepts_connections(server.getsockname()[1])
        with socket.create_connection(server.getsockname()) as client:
            assert not connected_to_itself(client)
    assert not accepts_connections(free_port())


def test_waiting_ends_when_the_server_listens_or_its_process_is_gone() -> None:
    port = free_port()
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    timer = threading.Timer(0.3, server.listen)
    timer.start()
    try:
        assert wait_listening(port, 10.0, alive=lambda: True)
    finally:
        timer.join()
        server.close()
    assert not wait_listening(free_port(), 10.0, alive=lambda: False)
