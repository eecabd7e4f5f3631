"""Conversions in a child process whose memory and time are bounded.

What a converter inflates is decided by its library: a 1.17 MB PDF whose one content
stream is ``zlib.compress(b"q Q " * 300_000_000)`` drove PDFium to 2.2 GB (2.58 GB in
``superbiz ingest``) before it was refused as "no text layer"; a 172 KB .docx whose
``word/document.xml`` unzips to 47 MB of paragraphs took python-docx to 843 MB and 255 s.
Counting pages, characters and zip entries (the converters' own bounds) cannot see
that in advance, and PDFium cannot be interrupted. So every conversion runs in one
long-lived child process (``python -m superbiz.knowledge.formats._isolated``) whose
data segment is capped (``RLIMIT_DATA``, ``ingest.convert-memory-mb``) and which is
killed past ``ingest.convert-timeout-s``; a file that needs more is skipped with the
reason and the next conversion gets a fresh child. The serving process never holds a
converter's library state, a crash in C (PDFium, libxml2) ends only the child, and the
work runs beside turns without the serving process's GIL.

Protocol: 8-byte length + pickle, both ways, over the child's stdin and a private copy
of its stdout (its fd 1 is /dev/null, so nothing a library prints can break a reply).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

from superbiz.exceptions import DocumentError

#: the child's data segment (heap and anonymous maps): a 2,000-page PDF needs ~35 MB, a
#: 4.8 MB HTML page of 600,000 paragraphs ~255 MB
MEMORY_BYTES = 320 * 1024 * 1024
#: a 2,000-page PDF converts in about 5 s here
TIMEOUT_S = 120.0
#: Markdown one file may convert to (a dense 2,000-page manual is about 10 million)
MAX_TEXT_CHARS = 20_000_000
#: how close to the cap a crashed child's peak must be to be called out of memory
_NEAR_CAP = 0.75
#: how often the parent notes a working child's peak memory
_SAMPLE_S = 0.02
_LENGTH = struct.Struct("<Q")
_MODULE = "superbiz.knowledge.formats._isolated"


@dataclass(frozen=True, slots=True)
class ConversionLimits:
    """The bounds of one conversion: the child's data segment, and wall-clock seconds."""

    memory_bytes: int = MEMORY_BYTES
    seconds: float = TIMEOUT_S


DEFAULT_LIMITS = ConversionLimits()


class _Child:
    """One converter process capped at ``memory_bytes``."""

    def __init__(self, memory_bytes: int) -> None:
        self.memory_bytes = memory_bytes
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", _MODULE, str(memory_bytes)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            close_fds=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.requests: IO[bytes] = self.process.stdin
        self.replies: IO[bytes] = self.process.stdout
        #: the largest ``VmHWM`` seen of it (its replies say theirs exactly)
        self.peak = 0

    def ask(self, request: tuple[Any, ...], seconds: float) -> tuple[Any, ...] | None:
        """The child's reply, or None when it ended without one (its exit is reaped);
        ``TimeoutError`` past ``seconds`` (the child is then killed)."""
        payload = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self.requests.write(_LENGTH.pack(len(payload)) + payload)
            self.requests.flush()
        except (BrokenPipeError, OSError):
            return None
        end = time.monotonic() + seconds
        head = self._read(_LENGTH.size, end)
        if head is None:
            return None
        body = self._read(_LENGTH.unpack(head)[0], end)
        if body is None:
            return None
        reply: tuple[Any, ...] = pickle.loads(body)
        return reply

    def _read(self, size: int, end: float) -> bytes | None:
        fd = self.replies.fileno()
        parts: list[bytes] = []
        left = size
        while left:
            wait = end - time.monotonic()
            if wait <= 0:
                raise TimeoutError
            if not select.select([fd], [], [], min(wait, _SAMPLE_S))[0]:
                self.sample()
                continue
            part = os.read(fd, min(left, 1 << 20))
            if not part:
                return None
            parts.append(part)
            left -= len(part)
        return b"".join(parts)

    def sample(self) -> None:
        """Note the child's peak RSS so far (``VmHWM``; unreadable once it has died)."""
        self.peak = max(self.peak, _peak_bytes(self.process.pid))

    def end(self) -> tuple[int | None, int]:
        """Kill and reap the child: ``(signal it died of or None, its peak RSS in bytes as
        last sampled)``; its ``ru_maxrss`` would count the parent's pages it was forked
        with."""
        self.sample()
        # not Popen.kill: it polls first, which would reap the child and lose its usage
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGKILL)
        for pipe in (self.requests, self.replies):
            with contextlib.suppress(OSError):
                pipe.close()
        try:
            _, status = os.waitpid(self.process.pid, 0)
        except ChildProcessError:  # pragma: no cover - reaped elsewhere
            return None, 0
        self.process.returncode = os.waitstatus_to_exitcode(status)
        died = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        return died, self.peak


class IsolatedConverter:
    """The process's converter child, started on first use and again after a file
    ended it; one conversion at a time (PDFium is not thread-safe anyway)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._child: _Child | None = None
        #: the largest peak RSS a conversion reached, in bytes (``superbiz eval bombs``)
        self.peak_bytes = 0

    def convert(
        self,
        suffix: str,
        data: bytes,
        label: str,
        encodings: Sequence[str],
        limits: ConversionLimits,
    ) -> tuple[str | None, str]:
        """``(title, markdown)`` of ``data``; ``DocumentError`` with the reason when the
        file needs more memory or time than ``limits``, or its converter refuses it."""
        with self._lock:
            child = self._child
            if child is None or child.memory_bytes != limits.memory_bytes:
                if child is not None:
                    child.end()
                child = self._child = _Child(limits.memory_bytes)
            try:
                reply = child.ask((suffix, data, label, tuple(encodings)), limits.seconds)
            except TimeoutError:
                self._child = None
                _, peak = child.end()
                self._note(peak)
                raise DocumentError(
                    label,
                    f"conversion took longer than {limits.seconds:g} s "
                    "(ingest.convert-timeout-s): refused",
                ) from None
            if reply is None:
                self._child = None
                died, peak = child.end()
                self._note(peak)
                raise DocumentError(label, _crash_reason(died, peak, limits)) from None
        kind = reply[0]
        if kind == "ok":
            self._note(reply[3])
            return reply[1], reply[2]
        if kind == "memory":
            self._note(reply[1])
            raise DocumentError(label, _memory_reason(limits))
        raise DocumentError(label, reply[1])

    def _note(self, peak: int) -> None:
        self.peak_bytes = max(self.peak_bytes, peak)

    def close(self) -> None:
        with self._lock:
            if self._child is not None:
                _, peak = self._child.end()
                self._note(peak)
                self._child = None


def _memory_reason(limits: ConversionLimits) -> str:
    return (
        f"converting it needs more than {limits.memory_bytes // (1024 * 1024)} MB of memory "
        "(ingest.convert-memory-mb): refused (a compressed stream or archive that inflates "
        "far beyond the file)"
    )


def _crash_reason(died: int | None, peak: int, limits: ConversionLimits) -> str:
    if peak >= _NEAR_CAP * limits.memory_bytes or died in (signal.SIGKILL, signal.SIGABRT):
        return _memory_reason(limits)
    name = signal.Signals(died).name if died else "no reply"
    return f"the converter crashed on this file ({name}): refused"


converter = IsolatedConverter()
atexit.register(converter.close)


# -- the child -----------------------------------------------------------------------------


def _peak_bytes(pid: int | str = "self") -> int:
    """A process's peak RSS since its last reset or exec (``VmHWM``), in bytes; 0 when
    it cannot be read (no ``/proc``, or the process has died)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _out_of_memory(exc: BaseException) -> bool:
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, MemoryError):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def _reset_peak() -> None:
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def _serve(memory_bytes: int) -> None:  # pragma: no cover - runs in the child
    import resource

    from superbiz.knowledge.formats import CONVERTERS

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_DATA, (memory_bytes, memory_bytes))
    replies = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    requests = sys.stdin.buffer
    while True:
        head = requests.read(_LENGTH.size)
        if len(head) < _LENGTH.size:
            return
        suffix, data, label, encodings = pickle.loads(requests.read(_LENGTH.unpack(head)[0]))
        _reset_peak()
        reply: tuple[Any, ...]
        try:
            converted = CONVERTERS[suffix](data, label, encodings)
            chars = len(converted.markdown)
            if chars > MAX_TEXT_CHARS:
                reply = (
                    "refused",
                    f"it converts to {chars} characters of text (the limit is {MAX_TEXT_CHARS})",
                )
            else:
                reply = ("ok", converted.title, converted.markdown, _peak_bytes())
        except MemoryError:
            reply = ("memory", _peak_bytes())
        except Exception as exc:  # a converter's bug is this file's skip line
            reason = exc.reason if isinstance(exc, DocumentError) else None
            # a converter may have wrapped the MemoryError, and a library that ran out of
            # memory may say "unknown error" (libxml2) instead
            near = _out_of_memory(exc) or _peak_bytes() >= _NEAR_CAP * memory_bytes
            reply = (
                ("memory", _peak_bytes())
                if near
                else ("refused", reason or f"the converter failed: {type(exc).__name__}: {exc}")
            )
        data = b""
        try:
            payload = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        except MemoryError:
            payload = pickle.dumps(("memory", _peak_bytes()))
        replies.write(_LENGTH.pack(len(payload)) + payload)
        replies.flush()


if __name__ == "__main__":  # pragma: no cover - the child
    _serve(int(sys.argv[1]))
