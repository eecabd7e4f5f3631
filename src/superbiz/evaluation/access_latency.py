"""``superbiz eval retrieval --access-probe``: what a permission filter costs a lookup.

On a dataset's knowledge base, every other domain is restricted to a group
(``access.domains``); each query is then looked up three times, in turn, in one run:
by an unrestricted reader (no filter), by a reader in that group (a filter that
admits everything) and by a reader outside it (half the domains filtered out). The
first two must rank alike; their p50s give the filter's cost.
"""

from __future__ import annotations

import time
from typing import Any

from superbiz.access import Reader
from superbiz.agents.runtime import open_lookup
from superbiz.config import AccessSettings, Settings
from superbiz.evaluation.metrics import percentile
from superbiz.knowledge.kb.base import KnowledgeBase

#: the group the restricted domains are given, and the readers of the probe
PROBE_GROUP = "access-probe"
READERS = {
    "unrestricted": None,
    "filtered, reads all": Reader.of_groups("probe-in", [PROBE_GROUP]),
    "filtered, half the domains": Reader.of_groups("probe-out", ["elsewhere"]),
}


def _restricted(settings: Settings) -> tuple[Settings, list[str]]:
    kb = KnowledgeBase(settings)
    try:
        domains = sorted(kb.domains())
    finally:
        kb.close()
    restricted = domains[::2]
    access = AccessSettings(domains={d: (PROBE_GROUP,) for d in restricted})
    return settings.model_copy(update={"access": access}), restricted


def measure_access(queries: list[str], settings: Settings) -> dict[str, Any]:
    """The probe's report: p50 and p95 per reader, the filter's p50 ratio, and how many
    queries the reader of everything saw ranked otherwise than the unrestricted one."""
    probed, restricted = _restricted(settings)
    latencies: dict[str, list[float]] = {name: [] for name in READERS}
    differ = 0
    with open_lookup(probed) as runtime:
        runtime.warm_up()
        for number, query in enumerate(queries):
            rankings: dict[str, list[str]] = {}
            names = list(READERS)
            turn = number % len(names)  # each reader goes first as often as the others
            for name in names[turn:] + names[:turn]:
                session = f"eval:access:{number}:{name}"
                started = time.perf_counter()
                outcome = runtime.lookup.lookup(session, query, reader=READERS[name])
                latencies[name].append((time.perf_counter() - started) * 1000)
                runtime.tracker.clear_session(session)
                rankings[name] = [d.doc_path for d in outcome.ranked]
            differ += rankings["unrestricted"] != rankings["filtered, reads all"]
    p50 = {name: round(percentile(values, 50), 2) for name, values in latencies.items()}
    return {
        "restricted_domains": restricted,
        "queries": len(queries),
        "p50_ms": p50,
        "p95_ms": {name: round(percentile(values, 95), 2) for name, values in latencies.items()},
        "filtered_p50_ratio": round(p50["filtered, reads all"] / p50["unrestricted"], 3)
        if p50["unrestricted"]
        else None,
        "restricted_p50_ratio": round(p50["filtered, half the domains"] / p50["unrestricted"], 3)
        if p50["unrestricted"]
        else None,
        "rankings_differ": differ,
    }


def access_line(probe: dict[str, Any]) -> str:
    """The probe in one line of the report."""
    p50 = probe["p50_ms"]
    return (
        f"permission filter ({len(probe['restricted_domains'])} domains restricted): lookup p50 "
        f"{p50['unrestricted']} ms unrestricted, {p50['filtered, reads all']} ms filtered "
        f"(reads all; ×{probe['filtered_p50_ratio']}), {p50['filtered, half the domains']} ms "
        f"filtered (half the domains; ×{probe['restricted_p50_ratio']}); rankings that "
        f"differ for the reader of everything: {probe['rankings_differ']}"
    )
