"""The in-process server of ``superbiz eval service`` (and of the HTTP tests): uvicorn on
a free loopback port, in a daemon thread of this process."""

from __future__ import annotations

import threading
import time
from typing import Any

from superbiz._net import free_port

STARTUP_TIMEOUT_S = 120.0


class LiveServer:
    """uvicorn serving ``app`` on a free loopback port, in a daemon thread."""

    def __init__(self, app: Any, host: str = "127.0.0.1") -> None:
        import uvicorn

        self.port = free_port()
        self.url = f"http://{host}:{self.port}"
        config = uvicorn.Config(
            app, host=host, port=self.port, log_level="warning", access_log=False, lifespan="on"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="superbiz-uvicorn", daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the HTTP server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
