"""Benchmarks of what hostile or careless input costs everyone else (issue 33):

* ``bombs``: the peak memory of ``superbiz ingest`` over files that inflate (a PDF
  stream bomb, a .docx bomb, an HTML entity bomb) and over a legitimate 2,000-page PDF,
  each against the same command's peak over one small Markdown file (its baseline);
* ``upload``: a chat's latency alone and while a 2,000-page PDF is being uploaded to the
  same server (one run, so both meet the same load);
* ``telemetry``: the wall time of ``superbiz ask`` without a collector, with one that
  refuses connections and with one that accepts and never answers, and what each
  printed on the terminal; and the time closing the telemetry takes in process.

Every file is generated here (``evaluation._bombs``); each ingest and ask runs as a
process of its own, as a user runs it.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from superbiz._net import free_port
from superbiz.config import Settings
from superbiz.evaluation._bombs import docx_bomb, html_entity_bomb, pdf_stream_bomb, text_pdf

MB = 1024 * 1024
#: the bound each file's ingest must stay under, above the baseline
BOUND_MB = 500
#: runs ``superbiz ingest`` in this process, then prints its own peak RSS and the
#: converter child's, both in bytes (``VmHWM``: ``ru_maxrss`` would count the pages of
#: the process each was started from)
_PROBE = """
import json, sys
from superbiz.cli import app
try:
    app(sys.argv[1:], standalone_mode=False)
except SystemExit:
    pass
from superbiz.knowledge.formats._isolated import _peak_bytes, converter
converter.close()
print("PEAKS " + json.dumps({"ingest": _peak_bytes(), "converter": converter.peak_bytes}))
"""


def _load() -> float:
    return os.getloadavg()[0]


# -- bombs -----------------------------------------------------------------------------------

#: name → (file name, what it is, its bytes)
BOMBS: dict[str, tuple[str, str, Callable[[], bytes]]] = {
    "baseline": ("small.md", "one small Markdown file", lambda: b"# Small\n\nOne line.\n"),
    "pdf_bomb": (
        "bomb.pdf",
        'PDF, one stream of zlib(b"q Q " * 300,000,000)',
        pdf_stream_bomb,
    ),
    "pdf_2000_pages": ("manual.pdf", "PDF of 2,000 pages of text", text_pdf),
    "docx_bomb": ("bomb.docx", ".docx of 1.4 million paragraphs (47 MB of XML)", docx_bomb),
    "html_entity_bomb": (
        "bomb.html",
        "HTML: billion-laughs DOCTYPE, 4.9 MB of references",
        html_entity_bomb,
    ),
}


def _ingest_peaks(file: Path, data_dir: Path) -> dict[str, Any]:
    """``superbiz ingest FILE`` in a process of its own: its peak RSS, the converter's,
    its wall time and its skip lines."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, "ingest", str(file), "--data-dir", str(data_dir), "--json"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
    )
    seconds = time.perf_counter() - started
    peaks_line = next((ln for ln in done.stdout.splitlines() if ln.startswith("PEAKS ")), None)
    if peaks_line is None:
        raise RuntimeError(f"superbiz ingest {file.name} failed: {done.stderr[-2000:]}")
    peaks = json.loads(peaks_line.removeprefix("PEAKS "))
    report_text = done.stdout[: done.stdout.index("PEAKS ")]
    report = json.loads(report_text) if report_text.strip().startswith("{") else {}
    return {
        "seconds": round(seconds, 1),
        "ingest_peak_mb": round(peaks["ingest"] / MB, 1),
        "converter_peak_mb": round(peaks["converter"] / MB, 1),
        "added": len(report.get("added", [])),
        "skipped": [item["reason"] for item in report.get("skipped", [])],
    }


def benchmark_bombs(settings: Settings, names: list[str] | None = None) -> dict[str, Any]:
    """Each file of ``BOMBS`` written and ingested from scratch, with its peaks."""
    chosen = ["baseline", *(n for n in (names or list(BOMBS)) if n != "baseline")]
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="superbiz-bombs-") as tmp:
        root = Path(tmp)
        for name in chosen:
            file_name, what, make = BOMBS[name]
            folder = root / name
            folder.mkdir()
            file = folder / file_name
            file.write_bytes(make())
            row = _ingest_peaks(file, root / f"data-{name}")
            row.update(what=what, file_bytes=file.stat().st_size, load=round(_load(), 2))
            rows[name] = row
    base = rows["baseline"]["ingest_peak_mb"]
    for row in rows.values():
        # the converter child is extra to the ingest process: all of its peak counts
        above = max(0.0, row["ingest_peak_mb"] - base) + row["converter_peak_mb"]
        row["above_baseline_mb"] = round(above, 1)
        row["within_bound"] = above < BOUND_MB
    return {
        "baseline_peak_mb": base,
        "bound_mb": BOUND_MB,
        "convert_memory_mb": settings.ingest.convert_memory_mb,
        "files": rows,
    }


def render_bombs_report(report: dict[str, Any], console: Console) -> None:
    table = Table(
        title=f"superbiz ingest: peak memory above the baseline ({report['baseline_peak_mb']} MB, "
        f"one small Markdown file); bound {report['bound_mb']} MB"
    )
    for column in (
        "file",
        "bytes",
        "ingest peak",
        "converter peak",
        "above baseline",
        "s",
        "outcome",
    ):
        table.add_column(column)
    for name, row in report["files"].items():
        outcome = "; ".join(row["skipped"]) or f"{row['added']} added"
        table.add_row(
            f"{name} ({row['what']})",
            f"{row['file_bytes']:,}",
            f"{row['ingest_peak_mb']} MB",
            f"{row['converter_peak_mb']} MB",
            f"{row['above_baseline_mb']} MB" + ("" if row["within_bound"] else " OVER"),
            str(row["seconds"]),
            outcome[:120],
        )
    console.print(table)
    console.print(f"load average at the end: {next(iter(report['files'].values()))['load']}")


# -- a chat during an upload -----------------------------------------------------------------


def benchmark_upload(settings: Settings, pages: int = 2000, alone: int = 5) -> dict[str, Any]:
    """A chat's latency alone (``alone`` chats), then chats sent one after another while
    a ``pages``-page PDF is uploaded to the same server (the example KB, extractive)."""
    import httpx

    from superbiz.agents.extractive import ExtractiveChatModel
    from superbiz.agents.runtime import open_runtime
    from superbiz.api import create_app
    from superbiz.evaluation._service_server import LiveServer
    from superbiz.knowledge.ingest.ingestor import Ingestor

    corpus = Path(__file__).resolve().parents[1] / "examples" / "corpus"
    pdf = text_pdf(pages=pages)
    question = "how do I handle a refund that failed"
    with tempfile.TemporaryDirectory(prefix="superbiz-upload-") as tmp:
        local = settings.model_copy(update={"data_dir": Path(tmp) / "data", "database_url": None})
        runtime = open_runtime(local, model=ExtractiveChatModel())
        try:
            Ingestor(runtime.kb, domains=runtime.domains).ingest([corpus])
            app = create_app(local, assistant=runtime, warm_up=True)
            with LiveServer(app) as server, httpx.Client(base_url=server.url, timeout=300) as http:

                def chat(session: str) -> float:
                    began = time.perf_counter()
                    answer = http.post(
                        "/api/chat", json={"session_id": session, "question": question}
                    )
                    answer.raise_for_status()
                    return time.perf_counter() - began

                chat("warm-up")
                before = [chat(f"alone-{i}") for i in range(alone)]
                uploaded: list[float] = []

                def upload() -> None:
                    began = time.perf_counter()
                    response = httpx.post(
                        f"{server.url}/api/documents",
                        files={"file": ("manual.pdf", pdf, "application/pdf")},
                        data={"domain": "manuals"},
                        timeout=1800,
                    )
                    response.raise_for_status()
                    uploaded.append(time.perf_counter() - began)

                thread = threading.Thread(target=upload)
                thread.start()
                during: list[float] = []
                while thread.is_alive():
                    during.append(chat(f"during-{len(during)}"))
                thread.join()
                after = [chat(f"after-{i}") for i in range(alone)]
        finally:
            runtime.close()
    return {
        "pages": pages,
        "pdf_bytes": len(pdf),
        "upload_s": round(uploaded[0], 2),
        "alone_s": _summary(before),
        "during_upload_s": _summary(during),
        "after_s": _summary(after),
        "worst_over_alone_s": round(max(during) - statistics.median(before), 2),
        "within_2_s": max(during) - statistics.median(before) <= 2.0,
        "load": round(_load(), 2),
    }


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "median": round(statistics.median(values), 3),
        "max": round(max(values), 3),
    }


def render_upload_report(report: dict[str, Any], console: Console) -> None:
    table = Table(
        title=f"a chat beside the upload of a {report['pages']}-page PDF "
        f"({report['pdf_bytes']:,} bytes, uploaded in {report['upload_s']} s)"
    )
    for column in ("chats", "n", "median s", "max s"):
        table.add_column(column)
    for label, key in (
        ("alone", "alone_s"),
        ("during the upload", "during_upload_s"),
        ("after", "after_s"),
    ):
        row = report[key]
        table.add_row(label, str(row["n"]), str(row["median"]), str(row["max"]))
    console.print(table)
    verdict = "within" if report["within_2_s"] else "NOT within"
    console.print(
        f"worst chat during the upload: {report['worst_over_alone_s']} s over the median alone "
        f"({verdict} 2 s); load average {report['load']}"
    )


# -- ask with a collector that is down -------------------------------------------------------


@contextmanager
def silent_collector() -> Iterator[str]:
    """A TCP server that accepts connections and never answers (an OTLP collector that
    hangs): its URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(32)
    listener.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            with suppress(OSError):
                held.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


def benchmark_telemetry(settings: Settings, runs: int = 3) -> dict[str, Any]:
    """``superbiz ask`` (a fresh session each time, the example KB) with no collector,
    one that refuses connections and one that never answers, alternating ``runs`` times;
    the wall time of each and the lines it wrote to stderr."""

    corpus = Path(__file__).resolve().parents[1] / "examples" / "corpus"
    with (
        tempfile.TemporaryDirectory(prefix="superbiz-telemetry-") as tmp,
        silent_collector() as silent,
    ):
        data = Path(tmp) / "data"
        # in a process of its own: Milvus Lite keeps its file for the process that opened it
        subprocess.run(
            [sys.executable, "-m", "superbiz.cli", "ingest", str(corpus), "--data-dir", str(data)],
            capture_output=True,
            check=True,
        )
        endpoints = {"none": None, "refused": f"http://127.0.0.1:{free_port()}", "silent": silent}
        times: dict[str, list[float]] = {name: [] for name in endpoints}
        printed: dict[str, list[str]] = {name: [] for name in endpoints}
        for run in range(runs):
            for name, endpoint in endpoints.items():
                env = {
                    k: v for k, v in os.environ.items() if not k.startswith("SUPERBIZ_TELEMETRY")
                }
                env["OPENBLAS_NUM_THREADS"] = "1"
                if endpoint:
                    env["SUPERBIZ_TELEMETRY__OTLP_ENDPOINT"] = endpoint
                began = time.perf_counter()
                done = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "superbiz.cli",
                        "ask",
                        "refund failed",
                        "--data-dir",
                        str(data),
                        "--session",
                        f"{name}-{run}",
                    ],
                    capture_output=True,
                    text=True,
                    check=False,
                    env=env,
                )
                times[name].append(time.perf_counter() - began)
                if done.returncode != 0:
                    raise RuntimeError(f"superbiz ask failed ({name}): {done.stderr[-2000:]}")
                lines = [
                    ln for ln in done.stderr.splitlines() if not ln.startswith(("plan ", "lookup "))
                ]
                printed[name] = sorted(set(printed[name]) | set(lines))
        closing = {name: _close_seconds(endpoint, settings) for name, endpoint in endpoints.items()}
    median = {name: statistics.median(values) for name, values in times.items()}
    return {
        "close_s": closing,
        "runs": runs,
        "flush_timeout_s": settings.telemetry.flush_timeout_s,
        "seconds": {name: [round(v, 2) for v in values] for name, values in times.items()},
        "median_s": {name: round(v, 2) for name, v in median.items()},
        "over_none_s": {name: round(v - median["none"], 2) for name, v in median.items()},
        "stderr_lines": printed,
        "exporter_lines": sum(
            "opentelemetry" in line for lines in printed.values() for line in lines
        ),
        "load": round(_load(), 2),
    }


def _close_seconds(endpoint: str | None, settings: Settings) -> float:
    """How long closing the telemetry of a run that made 50 spans takes, in this process:
    what exporting adds to a command's end, without the noise of starting a process."""
    from superbiz.config import TelemetrySettings
    from superbiz.telemetry import open_telemetry

    flush = settings.telemetry.flush_timeout_s
    telemetry = open_telemetry(TelemetrySettings(otlp_endpoint=endpoint, flush_timeout_s=flush))
    for number in range(50):
        with telemetry.tracer.start_as_current_span(f"span-{number}"):
            pass
    began = time.perf_counter()
    telemetry.close()
    return round(time.perf_counter() - began, 3)


def render_telemetry_report(report: dict[str, Any], console: Console) -> None:
    table = Table(title=f"superbiz ask, {report['runs']} runs each, alternating")
    columns = ("collector", "wall s (each run)", "median s", "over none s", "close s", "stderr")
    for column in columns:
        table.add_column(column)
    for name, values in report["seconds"].items():
        table.add_row(
            name,
            ", ".join(str(v) for v in values),
            str(report["median_s"][name]),
            str(report["over_none_s"][name]),
            str(report["close_s"][name]),
            " | ".join(report["stderr_lines"][name]) or "-",
        )
    console.print(table)
    console.print(
        f"lines from the exporter itself: {report['exporter_lines']}; "
        f"telemetry.flush-timeout-s {report['flush_timeout_s']}; load average {report['load']}"
    )
