"""The curves of ``superbiz eval scale`` as one PNG: ``python docs/plots/scale.py
scale-embedded.json [scale-server.json ...] -o docs/scale.png`` (``pip install -e
".[docs]"`` brings matplotlib). Each JSON is one profile's run; a run stopped part-way
plots the sizes it finished."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

PANELS = (
    ("ingest documents/s", lambda row: row["ingest"]["documents_per_s"]),
    ("ingest ÷ embedder alone", lambda row: row["ingest"]["ratio_to_embedder"]),
    ("lookup p50 / p95 ms", lambda row: row["lookup_ms"]["p50"]),
    ("recall@5 (seed queries)", lambda row: row["recall"]["seed"].get("recall@5")),
    ("peak RSS MB", lambda row: row["peak_rss_mb"]),
    ("planner map tokens", lambda row: row["planner"]["map_tokens"]),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("-o", "--output", type=Path, default=Path("docs/scale.png"))
    args = parser.parse_args()
    runs: list[dict[str, Any]] = [json.loads(p.read_text(encoding="utf-8")) for p in args.reports]
    figure, axes = plt.subplots(2, 3, figsize=(13, 7))
    for axis, (title, value) in zip(axes.flat, PANELS, strict=True):
        for run in runs:
            rows = run["sizes"]
            sizes = [row["documents"] for row in rows]
            axis.plot(sizes, [value(row) for row in rows], marker="o", label=run["profile"])
            if title.startswith("lookup"):
                p95 = [row["lookup_ms"]["p95"] for row in rows]
                axis.plot(sizes, p95, marker="x", linestyle="--", label=f"{run['profile']} p95")
        axis.set_title(title)
        axis.set_xscale("log")
        axis.set_xlabel("documents")
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8)
    figure.suptitle("superbiz eval scale (seed: " + ", ".join(runs[0]["seed"]) + ")")
    figure.tight_layout()
    figure.savefig(args.output, dpi=110)


if __name__ == "__main__":
    main()
