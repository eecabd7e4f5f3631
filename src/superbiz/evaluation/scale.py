"""``superbiz eval scale``: one knowledge base grown from a seed set to tens of thousands
of documents, measured at each size.

The documents come from ``_scale_corpus`` (the seed sets and distinct copies of them,
with queries whose gold is known). The sizes are the seed's size times 1, 5, 25, …
up to ``max_documents`` (the last size is ``max_documents`` itself). Each size ingests
only what the previous one did not have (the same KB grows), then measures:

* ingest: documents/s and chunks/s of the new documents, and the embedder's own time
  for the same chunks (a sample of them embedded alone, with the ingest's batches,
  threads and worker processes), so the ratio says what ingest adds on top of embedding;
* peak RSS of this process (and of the Milvus server on the server profile), disk;
* lookups: p50/p95 and recall of the seed's own queries (the same ones at every size)
  and of questions of the copies;
* the planner: the map's build time, a plan's latency, the map the LLM planner is shown
  (estimated tokens, the largest over the questions) and the plans' domain recall;
* ``superbiz gaps``: the report's time over the lookups just recorded.

The report is written after every size (``on_size``), so a run stopped part-way still
reports the sizes it finished.
"""

from __future__ import annotations

import os
import random
import resource
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from superbiz._text import load_segmenter
from superbiz.agents.planner import MapPlanner, PlanRequest, shown_map
from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.config import IngestSettings, Settings, VectorSettings
from superbiz.evaluation._scale_corpus import ScaleCorpus, ScaleQuery
from superbiz.evaluation._scale_searches import restricted_searches
from superbiz.evaluation._scale_server import MilvusLiteServer, PostgresSchema
from superbiz.evaluation.metrics import mean, percentile, recall_at, reciprocal_rank
from superbiz.knowledge.coverage.gaps import gap_report
from superbiz.knowledge.coverage.map import KnowledgeMap, estimate_tokens
from superbiz.knowledge.documents.chunking import chunk_markdown, embedding_text
from superbiz.knowledge.documents.document import load_document
from superbiz.knowledge.ingest.batches import EMBED_BATCH, EMBED_WORKERS
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.embedding_processes import EmbeddingProcesses

Profile = Literal["embedded", "server"]
#: the multiples of the seed's size measured before ``max_documents``
FACTORS = (1, 5, 25, 125, 625)
#: chunks embedded alone, per size, to measure the embedder's own rate
EMBED_SAMPLE = 2048
#: passes over that sample; the fastest is the embedder's rate (one pass once ran at half
#: the speed of the next ones on this shared machine: 225 against 405–446 chunks/s)
EMBED_PASSES = 2
#: questions of each copy asked beside the seed's
PER_COPY = 2
#: passes over the seed's questions timed per size (the median of their figures)
LOOKUP_ROUNDS = 3
#: questions planned per size (the seed's first ones)
PLAN_QUESTIONS = 100
#: lookups recorded per size for ``superbiz gaps`` to report on
GAP_LOOKUPS = 100
DEFAULT_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/test"

Notice = Callable[[str], None]


def sizes(seed: int, max_documents: int) -> list[int]:
    """The seed's size times ``FACTORS`` below ``max_documents``, then it.

    >>> sizes(477, 50_000), sizes(477, 477), sizes(477, 3000)
    ([477, 2385, 11925, 50000], [477], [477, 2385, 3000])
    """
    below = [seed * f for f in FACTORS if seed * f < max_documents]
    return [*below, max_documents]


def benchmark_scale(
    datasets: Sequence[Path],
    settings: Settings,
    work: Path,
    *,
    profile: Profile = "embedded",
    max_documents: int = 50_000,
    database_url: str = DEFAULT_POSTGRES,
    lookup_rounds: int = LOOKUP_ROUNDS,
    on_size: Callable[[dict[str, Any]], None] | None = None,
    on_notice: Notice | None = None,
) -> dict[str, Any]:
    """Grow one KB in ``work`` (the generated corpus is kept there, written anew by each
    run) and measure it at each size; ``on_size`` gets the report so far after each
    size."""
    notice = on_notice or (lambda _: None)
    work.mkdir(parents=True, exist_ok=True)
    corpus = ScaleCorpus(datasets, work / "corpus")
    ladder = sizes(corpus.seed_size, max_documents)
    report: dict[str, Any] = {
        "profile": profile,
        "seed": [str(d) for d in datasets],
        "seed_documents": corpus.seed_size,
        "seed_queries": len(corpus.queries),
        "max_documents": max_documents,
        "planned_sizes": ladder,
        "lookup_rounds": lookup_rounds,
        "embedder": settings.embedding.model
        if settings.embedding.provider != "use"
        else "use-multilingual-v3",
        "cpus": os.cpu_count(),
        "sizes": [],
        "stopped": None,
    }
    with (
        _stores(profile, settings, work, database_url) as (scratch, server, schema),
        open_runtime(scratch) as runtime,
    ):
        kb = runtime.kb
        _ = kb.embedder.dimension, kb.store
        load_segmenter()
        try:
            for documents in ladder:
                notice(f"{profile}: {documents} documents")
                row = _measure_size(runtime, corpus, documents, notice, lookup_rounds)
                row["server_peak_rss_mb"] = _round(server.peak_rss_mb()) if server else None
                row["database_mb"] = _round(schema.size_mb()) if schema else None
                row["disk_mb"] = _round(_disk_mb(work / "data") + (row["database_mb"] or 0))
                report["sizes"].append(row)
                if on_size:
                    on_size(report)
        except KeyboardInterrupt:
            report["stopped"] = "interrupted"
    return report


@contextmanager
def _stores(
    profile: Profile, settings: Settings, work: Path, database_url: str
) -> Iterator[tuple[Settings, MilvusLiteServer | None, PostgresSchema | None]]:
    """The scratch settings of ``profile``: SQLite and a Lite file in ``work/data``, or
    a PostgreSQL schema and a ``milvus-lite server`` whose data is in ``work/data``."""
    data = work / "data"
    if data.exists():  # every run starts from an empty KB; the corpus is reused
        shutil.rmtree(data)
    ingest = settings.ingest.model_dump()
    common: dict[str, Any] = {
        "data_dir": data,
        "embedding": settings.embedding,
        "retrieval": settings.retrieval,
        "advanced": settings.advanced,
        "ingest": IngestSettings(**ingest),
    }
    if profile == "embedded":
        yield Settings(database_url=None, vector=VectorSettings(), **common), None, None
        return
    with MilvusLiteServer(data / "milvus-server") as server, PostgresSchema(database_url) as schema:
        yield (
            Settings(database_url=schema.url, vector=VectorSettings(uri=server.uri), **common),
            server,
            schema,
        )


def _measure_size(
    runtime: Runtime, corpus: ScaleCorpus, documents: int, notice: Notice, lookup_rounds: int
) -> dict[str, Any]:
    kb, settings = runtime.kb, runtime.settings
    before = corpus.documents_written()
    corpus.write(documents)
    new_paths = list(corpus.iter_paths(documents))[before:]
    chunks_before = _chunks(kb)
    cpu_before, started = _cpu_seconds(), time.perf_counter()
    report = Ingestor(kb, domains=runtime.domains).ingest([corpus.root], prune=True)
    ingest_s = time.perf_counter() - started
    ingest_cpu = _cpu_seconds() - cpu_before
    chunks_total = _chunks(kb)
    new_chunks = chunks_total - chunks_before
    if report.skipped:
        notice(f"{len(report.skipped)} skipped, e.g. {report.skipped[0]}")
    embed_rate = _embedder_rate(kb, settings, corpus.root, new_paths)
    embed_s = new_chunks / embed_rate if embed_rate else None
    notice(f"ingested {len(report.added)} documents in {ingest_s:.1f} s")
    upload = _upload(runtime, corpus.root.parent / "upload")

    copies = -(-documents // corpus.seed_size)
    queries = corpus.queries_of(documents // corpus.seed_size, PER_COPY)
    lookups = _lookups(runtime, queries, lookup_rounds)
    seed = [q.query for q in queries if q.copy == 0]
    searches = restricted_searches(kb, seed, documents, lookup_rounds)
    planning = _planning(runtime, corpus.queries[:PLAN_QUESTIONS])
    gaps = _gaps(runtime, queries[:GAP_LOOKUPS], documents)
    return {
        "documents": documents,
        "copies": copies,
        "chunks": chunks_total,
        "domains": len(kb.domains()),
        "ingest": {
            "documents": len(report.added) + len(report.updated),
            "chunks": new_chunks,
            "seconds": round(ingest_s, 2),
            "cpu_seconds": round(ingest_cpu, 2),
            "documents_per_s": _round(len(report.added) / ingest_s if ingest_s else None),
            "chunks_per_s": _round(new_chunks / ingest_s if ingest_s else None),
            "embedder_seconds": _round(embed_s),
            "embedder_chunks_per_s": _round(embed_rate),
            "ratio_to_embedder": _round(ingest_s / embed_s if embed_s else None, 2),
        },
        "upload": upload,
        "peak_rss_mb": _round(_peak_rss_mb()),
        "rss_mb": _round(_rss_mb()),
        **lookups,
        "dense_search_ms": searches,
        "planner": planning,
        "gaps": gaps,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def _upload(runtime: Runtime, folder: Path) -> dict[str, float]:
    """Seconds to add one new file to the KB at this size, and to take it out again
    (``ingest --prune``), as a team member's upload and delete run in a serving process:
    the statistics, the map and the index's state are brought up to date, not rebuilt."""
    file = folder / "oncall" / "handover.md"
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text("# On-call handover\n\n## Steps\n\nRead the pager queue aloud.\n")
    ingest = Ingestor(runtime.kb, domains=runtime.domains).ingest
    started = time.perf_counter()
    ingest([folder])
    added = time.perf_counter() - started
    file.unlink()
    started = time.perf_counter()
    ingest([folder], prune=True)
    return {"seconds": round(added, 3), "delete_seconds": round(time.perf_counter() - started, 3)}


def _chunks(kb: KnowledgeBase) -> int:
    return sum(doc.chunk_count for doc in kb.documents.all())


def _embedder_rate(
    kb: KnowledgeBase, settings: Settings, root: Path, paths: Sequence[str]
) -> float | None:
    """Chunks per second of the embedder alone on a sample of ``paths``' chunks, as a
    large ingest runs it: its batch size, threads and, beside Milvus Lite, worker
    processes (``Ingestor._embedding``); the fastest of ``EMBED_PASSES`` passes, the
    physical limit an ingest is compared with."""
    rng = random.Random(36)
    sample = rng.sample(list(paths), len(paths))
    ingest = settings.ingest
    texts: list[str] = []
    for path in sample:
        doc = load_document(root / path, root, ingest.max_file_bytes, ingest.encodings)
        for chunk in chunk_markdown(doc.body, ingest.chunk_size, ingest.chunk_overlap):
            texts.append(embedding_text(doc.headline, chunk.heading, chunk.text))
        if len(texts) >= EMBED_SAMPLE:
            break
    if not texts:
        return None
    batches = [texts[i : i + EMBED_BATCH] for i in range(0, len(texts), EMBED_BATCH)]
    workers = ingest.embedding_processes if settings.uses_milvus_lite else 0
    processes = kb.embedder.in_processes(workers)
    with processes as embed, ThreadPoolExecutor(max_workers=EMBED_WORKERS) as pool:
        if isinstance(processes, EmbeddingProcesses):
            processes.ready()  # their start is the ingest's cost, not the embedder's
        rates = []
        for _ in range(EMBED_PASSES):
            started = time.perf_counter()
            list(pool.map(embed, batches))
            rates.append(len(texts) / (time.perf_counter() - started))
        return max(rates)


def _lookups(runtime: Runtime, queries: Sequence[ScaleQuery], rounds: int) -> dict[str, Any]:
    """Latency of the seed's questions (the same at every size) and recall of the seed's
    and of the copies' questions, one fresh session each (as ``eval retrieval``).

    The seed's questions are timed ``rounds`` times and each figure is the median of the
    rounds' (``p50_rounds`` lists them): one pass over them on two cores spread by ±15 %
    between runs of the same code, more than the targets' margins. Recall is the first
    round's (a lookup's hits do not change between rounds)."""
    governed, tracker = runtime.lookup, runtime.tracker
    runtime.warm_up()
    timed: list[tuple[list[float], list[float]]] = []  # wall and this process's CPU
    ranks: dict[str, list[tuple[list[str], tuple[str, ...]]]] = {"seed": [], "copies": []}
    for round_ in range(max(rounds, 1)):
        latencies: list[float] = []
        cpu: list[float] = []  # what a loaded machine moves least
        for item in queries if round_ == 0 else [q for q in queries if q.copy == 0]:
            session = f"scale:{item.id}"
            tracker.clear_session(session)
            started, cpu_before = time.perf_counter(), _cpu_seconds()
            outcome = governed.lookup(session, item.query)
            if item.copy == 0:
                latencies.append((time.perf_counter() - started) * 1000)
                cpu.append((_cpu_seconds() - cpu_before) * 1000)
            tracker.clear_session(session)
            if round_ == 0:
                ranked = [doc.doc_path for doc in outcome.ranked][:10]
                ranks["seed" if item.copy == 0 else "copies"].append((ranked, item.gold))
        timed.append((latencies, cpu))

    def median_of(figure: Callable[[list[float], list[float]], float]) -> float | None:
        return _round(percentile([figure(wall, cpu) for wall, cpu in timed], 50), 2)

    return {
        "lookup_ms": {
            "p50": median_of(lambda wall, _: percentile(wall, 50)),
            "p95": median_of(lambda wall, _: percentile(wall, 95)),
            "mean": median_of(lambda wall, _: mean(wall)),
            "cpu_p50": median_of(lambda _, cpu: percentile(cpu, 50)),
            "rounds": len(timed),
            "p50_rounds": [_round(percentile(wall, 50), 2) for wall, _ in timed],
        },
        "recall": {name: _recall(rows) for name, rows in ranks.items()},
    }


def _recall(rows: list[tuple[list[str], tuple[str, ...]]]) -> dict[str, Any]:
    if not rows:
        return {"queries": 0}
    return {
        "queries": len(rows),
        "recall@1": round(mean([recall_at(r, list(g), 1) for r, g in rows]), 4),
        "recall@5": round(mean([recall_at(r, list(g), 5) for r, g in rows]), 4),
        "recall@10": round(mean([recall_at(r, list(g), 10) for r, g in rows]), 4),
        "mrr@10": round(mean([reciprocal_rank(r, list(g), 10) for r, g in rows]), 4),
    }


def _planning(runtime: Runtime, questions: Sequence[ScaleQuery]) -> dict[str, Any]:
    """The map's build, a deterministic plan's latency (the first one reads the map's
    entry vectors the ingest kept), the map an LLM planner is shown and the plans' domain
    recall."""
    started = time.perf_counter()
    kmap = runtime.knowledge_map()
    build_s = time.perf_counter() - started
    planner = runtime.planner if isinstance(runtime.planner, MapPlanner) else _map_planner(runtime)
    budget = runtime.settings.advanced.planner.map_token_budget
    latencies: list[float] = []
    first_ms = None
    tokens: list[int] = []
    hits = 0
    for item in questions:
        request = PlanRequest(item.query, kmap)
        started = time.perf_counter()
        plan = planner.plan(request)
        elapsed = (time.perf_counter() - started) * 1000
        if first_ms is None:
            first_ms = elapsed
        else:
            latencies.append(elapsed)
        hits += bool(item.category) and item.category in plan.domain_ids
        shown = shown_map(kmap, item.query, planner, runtime.settings.planner_config)
        tokens.append(estimate_tokens(shown.to_yaml(budget)))
    judged = sum(1 for q in questions if q.category)
    return {
        "map_build_s": round(build_s, 3),
        "first_plan_ms": _round(first_ms, 1),
        "new_process_first_plan_ms": _round(_new_process_plan(runtime, kmap, questions), 1),
        "plan_ms": {
            "p50": _round(percentile(latencies, 50), 2),
            "p95": _round(percentile(latencies, 95), 2),
        },
        "map_tokens": max(tokens, default=0),
        "map_tokens_full": estimate_tokens(kmap.to_yaml(10**9)),
        "domain_recall": _round(hits / judged if judged else None, 4),
        "questions": len(questions),
    }


def _new_process_plan(
    runtime: Runtime, kmap: KnowledgeMap, questions: Sequence[ScaleQuery]
) -> float | None:
    """A first plan as a new process (each ``superbiz ask``, a new replica) makes it, with
    nothing in memory: it reads the entry vectors the ingest kept."""
    if not questions:
        return None
    planner = _map_planner(runtime)
    started = time.perf_counter()
    planner.plan(PlanRequest(questions[0].query, kmap))
    return (time.perf_counter() - started) * 1000


def _map_planner(runtime: Runtime) -> MapPlanner:
    """A map planner with nothing in memory, as a new process makes it."""
    return MapPlanner(runtime.kb.embedder, runtime.settings.planner_config, runtime.kb.map_vectors)


def _gaps(runtime: Runtime, questions: Sequence[ScaleQuery], documents: int) -> dict[str, Any]:
    """``superbiz gaps`` over the recorded lookups: ``questions`` are recorded first (as
    ``superbiz lookup`` records them), so the record grows with every size."""
    for item in questions:
        runtime.user_lookup(f"scale-gaps:{documents}:{item.id}", item.query)
    kb = runtime.kb
    started = time.perf_counter()
    report = gap_report(kb.engine, kb.embedder, kb.documents, runtime.settings.gap_config)
    return {
        "seconds": round(time.perf_counter() - started, 3),
        "questions": report.questions,
        "clusters": len(report.clusters),
    }


def _disk_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / (1 << 20)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _rss_mb() -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)
