"""Plans that never hide the answer, on a hand-written KB whose domains overlap.

Three domains of six runbooks each (real USE, Milvus Lite, SQLite): ``kubernetes`` is
told apart from the rest by its own words; ``database`` and ``application`` both hold
connection-pool runbooks (is a pool alert the database's or the application's?). The
map planner scopes a plan only where the map's own titles show it can tell the domain;
a scoped planned lookup that finds no answer in its domain searches the whole KB within
the same lookup; the governor records the domain of the document shown.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from conftest import write_kb
from superbiz.agents._domain_margin import UNMEASURED, clear_margins
from superbiz.agents.executor import Executor
from superbiz.agents.extractive import ExtractiveChatModel
from superbiz.agents.planner import MapPlanner, Plan, PlannedDomain, PlanRequest
from superbiz.config import GovernanceConfig, PlannerConfig, Settings
from superbiz.governance.lookup import GovernedLookup
from superbiz.governance.tracker import InMemorySessionTracker
from superbiz.knowledge.coverage.domains import DomainService
from superbiz.knowledge.coverage.map import KnowledgeMap, build_map
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.embedders import Embedder


def runbook(domain: str, title: str, body: str) -> str:
    return f"---\ntitle: {title}\ncategory: {domain}\n---\n# {title}\n\n{body}\n"


RUNBOOKS: dict[str, tuple[str, str]] = {
    "kubernetes/crashloop.md": (
        "Pod stuck in CrashLoopBackOff",
        "The container exits right after start and the kubelet restarts the pod again and "
        "again. Read the previous container log with kubectl logs --previous.",
    ),
    "kubernetes/oomkilled.md": (
        "Pod container OOMKilled",
        "The kernel killed the container for exceeding its memory limit (exit code 137). "
        "Raise the pod memory limit or find the leak.",
    ),
    "kubernetes/imagepull.md": (
        "Pod ImagePullBackOff",
        "The kubelet cannot pull the container image: check the image tag, the registry "
        "credentials and the pull secret of the namespace.",
    ),
    "kubernetes/node-disk.md": (
        "Kubernetes node DiskPressure",
        "The node is low on disk; the kubelet evicts pods. Clean unused images and "
        "container logs on the node.",
    ),
    "kubernetes/hpa.md": (
        "HorizontalPodAutoscaler not scaling pods",
        "The HPA reports unknown metrics: check that metrics-server runs and that the "
        "deployment's pods declare CPU requests.",
    ),
    "kubernetes/ingress.md": (
        "Kubernetes Ingress returns 502",
        "The ingress controller has no ready endpoints for the service: check the pod "
        "readiness probes and the service selector.",
    ),
    "database/replication-lag.md": (
        "MySQL replication lag",
        "The replica applies the primary's binlog too slowly. Check long transactions on "
        "the primary and the replica's SQL thread.",
    ),
    "database/slow-query.md": (
        "MySQL slow query investigation",
        "Read the slow query log, EXPLAIN the statement and add the missing index.",
    ),
    "database/deadlock.md": (
        "MySQL deadlock found when trying to get lock",
        "Two transactions lock rows in opposite order. Read SHOW ENGINE INNODB STATUS and "
        "lock rows in one order.",
    ),
    "database/max-connections.md": (
        "MySQL too many connections",
        "The server refuses new connections at max_connections. Count the connections per "
        "client host and lower each application's connection pool size.",
    ),
    "database/disk-full.md": (
        "MySQL data disk full",
        "The data volume is full: purge old binlogs and grow the volume.",
    ),
    "database/failover.md": (
        "MySQL primary failover",
        "Promote the most up-to-date replica and repoint the applications to it.",
    ),
    "application/hikari-timeout.md": (
        "Connection is not available, request timed out",
        "HikariCP gave up waiting for a free connection from the pool: connections leak "
        "or the pool is too small for the load. Enable leakDetectionThreshold.",
    ),
    "application/jedis-pool.md": (
        "Could not get a resource from the pool",
        "The Jedis pool is exhausted: every Redis connection is borrowed. Return "
        "connections in finally blocks and size maxTotal for the load.",
    ),
    "application/heap.md": (
        "Java heap space OutOfMemoryError",
        "The JVM ran out of heap. Take a heap dump and look for the largest retainers.",
    ),
    "application/thread-pool.md": (
        "Thread pool saturated, task rejected",
        "The executor queue is full and new tasks are rejected. Size the pool and the "
        "queue for the load and find slow tasks.",
    ),
    "application/gc-pauses.md": (
        "Long garbage collection pauses",
        "Stop-the-world GC pauses stall requests. Read the GC log and tune the heap.",
    ),
    "application/circuit-breaker.md": (
        "Circuit breaker open for a downstream service",
        "Calls to the downstream fail fast while the breaker is open. Check the downstream "
        "service's health before closing it.",
    ),
}
FILES = {path: runbook(path.split("/")[0], *text) for path, text in RUNBOOKS.items()}
#: a scope measurable on 18 titles: one miss in five may be tolerated (``min_rows`` 5)
MEASURABLE = PlannerConfig(scope_precision=0.8)


@pytest.fixture(scope="module")
def overlapping_kb(
    tmp_path_factory: pytest.TempPathFactory, use_embedder: Embedder
) -> Iterator[KnowledgeBase]:
    root = tmp_path_factory.mktemp("overlapping-kb")
    kb = KnowledgeBase(Settings(data_dir=root / "data"), embedder=use_embedder)
    try:
        Ingestor(kb, domains=DomainService(kb)).ingest([write_kb(root / "kb", dict(FILES))])
        yield kb
    finally:
        kb.close()


@pytest.fixture(scope="module")
def kmap(overlapping_kb: KnowledgeBase) -> KnowledgeMap:
    return build_map(overlapping_kb)


def test_a_domain_the_map_tells_apart_is_scoped(use_embedder: Embedder, kmap: KnowledgeMap) -> None:
    planner = MapPlanner(use_embedder, MEASURABLE)
    question = "A pod keeps restarting in CrashLoopBackOff after each deploy"

    plan = planner.plan(PlanRequest(question, kmap))

    assert planner.clear_margins(kmap)["kubernetes"] < 1
    assert plan == Plan(True, (PlannedDomain("kubernetes", question),), scoped=True)


def test_a_question_between_overlapping_domains_is_not_scoped(
    use_embedder: Embedder, kmap: KnowledgeMap
) -> None:
    planner = MapPlanner(use_embedder, MEASURABLE)
    question = "connection pool exhausted, requests wait for a free connection"

    plan = planner.plan(PlanRequest(question, kmap))

    assert not plan.scoped and plan.need_retrieval
    assert plan.domain_ids[0] in ("database", "application")


def test_a_map_too_small_to_measure_never_scopes(
    use_embedder: Embedder, kmap: KnowledgeMap
) -> None:
    strict = MapPlanner(use_embedder, PlannerConfig(scope_precision=0.99))  # 100 titles

    plan = strict.plan(PlanRequest("A pod keeps restarting in CrashLoopBackOff", kmap))

    assert set(strict.clear_margins(kmap).values()) == {float("inf")}
    assert not plan.scoped and plan.domain_ids[0] == "kubernetes"


def governed_turn(kb: KnowledgeBase, question: str, plan: Plan) -> tuple[list[str], list[str]]:
    """The documents a governed extractive turn under ``plan`` put in front of the model,
    and the domains its lookups recorded."""
    executor = Executor(
        ExtractiveChatModel(), GovernedLookup(kb, InMemorySessionTracker()), GovernanceConfig()
    )
    turn = executor.run("scope", question, turn=1, plan=plan)
    return turn.evidence, [o.domain or "" for o in turn.lookups]


def test_a_plan_to_the_wrong_domain_still_shows_what_one_unscoped_lookup_finds(
    overlapping_kb: KnowledgeBase,
) -> None:
    question = "Could not get a resource from the pool"
    wrong = Plan(True, (PlannedDomain("database", question),))
    one_lookup = GovernedLookup(overlapping_kb, InMemorySessionTracker()).lookup("one", question)

    evidence, domains = governed_turn(overlapping_kb, question, wrong)

    gold = "application/jedis-pool.md"
    assert one_lookup.details.shown[0] == gold
    assert gold in evidence
    assert domains[0] == "application"  # the document's own domain, not the planned one


def test_an_unscoped_plan_runs_one_lookup_over_the_whole_kb(
    overlapping_kb: KnowledgeBase,
) -> None:
    question = "Could not get a resource from the pool"
    plan = Plan(
        True,
        (PlannedDomain("database", question), PlannedDomain("kubernetes", question)),
        scoped=False,
    )

    evidence, domains = governed_turn(overlapping_kb, question, plan)

    assert evidence[0] == "application/jedis-pool.md"
    assert domains[0] == "application"


def test_a_planned_domain_that_answers_is_not_widened(overlapping_kb: KnowledgeBase) -> None:
    question = "MySQL deadlock found when trying to get lock"
    lookup = GovernedLookup(overlapping_kb, InMemorySessionTracker())

    outcome = lookup.lookup("scoped", question, "database", widen=True)

    assert outcome.details.shown[0] == "database/deadlock.md"
    assert not outcome.details.widened


def test_the_margin_is_measured_once_per_map(
    use_embedder: Embedder, kmap: KnowledgeMap, tmp_path: Path
) -> None:
    planner = MapPlanner(use_embedder, MEASURABLE)

    first = planner.clear_margins(kmap)

    assert planner.clear_margins(kmap) is first


def test_the_margins_do_not_depend_on_whether_a_domains_entries_are_listed_together() -> None:
    """A map lists each domain's entries together and is measured without copying them;
    the same entries interleaved (copied into domain order) measure the same margins."""
    rng = np.random.default_rng(7)
    centres = rng.normal(size=(4, 16))
    entries = np.repeat(centres, 25, axis=0) + rng.normal(0, 0.6, (100, 16))
    titles = entries + rng.normal(0, 0.3, (100, 16))
    domains = [name for name in "dbca" for _ in range(25)]  # together, not in name order
    shuffled = rng.permutation(100)

    together = clear_margins(titles, entries, domains, 0.9)
    interleaved = clear_margins(
        titles[shuffled], entries[shuffled], [domains[i] for i in shuffled], 0.9
    )

    assert together == interleaved
    assert any(margin != UNMEASURED for margin in together.values())
