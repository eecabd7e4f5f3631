"""The curves of ``superbiz eval scale``, one line per profile, from
``docs/data/scale-embedded.json`` and ``docs/data/scale-server.json`` (``superbiz eval scale
SEED -o FILE``, ``--profile server``); a run stopped part-way plots the sizes it finished.

Draws ``scale.svg``. ``python docs/plots/scale.py OUT_DIR`` draws it outside the site build;
``--png FILE`` also writes the PNG the README shows (``docs/scale.png``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import load, plt, save

PROFILES = ("embedded", "server")

Row = dict[str, Any]
PANELS: tuple[tuple[str, Callable[[Row], Any]], ...] = (
    ("ingest documents/s", lambda row: row["ingest"]["documents_per_s"]),
    ("ingest ÷ embedder alone", lambda row: row["ingest"]["ratio_to_embedder"]),
    ("lookup p50 / p95 ms", lambda row: row["lookup_ms"]["p50"]),
    ("recall@5 (seed queries)", lambda row: row["recall"]["seed"].get("recall@5")),
    # the server profile's process and its Milvus server together: what the machine holds
    ("peak RSS MB (+ Milvus server)", lambda row: row["peak_rss_mb"] + _server_mb(row)),
    ("planner map tokens", lambda row: row["planner"]["map_tokens"]),
)


def _server_mb(row: Row) -> float:
    return float(row.get("server_peak_rss_mb") or 0)


def figure(data_dir: Path) -> Any:
    runs = [
        load(path) for profile in PROFILES if (path := data_dir / f"scale-{profile}.json").is_file()
    ]
    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    for axis, (title, value) in zip(axes.flat, PANELS, strict=True):
        for run in runs:
            rows = run["sizes"]
            sizes = [row["documents"] for row in rows]
            axis.plot(sizes, [value(row) for row in rows], marker="o", label=run["profile"])
            if title.startswith("lookup"):
                p95 = [row["lookup_ms"]["p95"] for row in rows]
                axis.plot(sizes, p95, marker="x", linestyle="--", label=f"{run['profile']} p95")
                axis.set_yscale("log")  # the benchmark's Milvus server is 10-60 × the embedded
        axis.set_title(title)
        axis.set_xscale("log")
        axis.set_xlabel("documents")
        axis.legend(fontsize=8)
    seeds = ", ".join(runs[0]["seed"]) if runs else "none"
    fig.suptitle(f"superbiz eval scale (seed: {seeds})")
    fig.tight_layout()
    return fig


def render(data_dir: Path, out_dir: Path) -> None:
    save(figure(data_dir), out_dir / "scale.svg")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--png", type=Path, help="also write this PNG (the README's)")
    args = parser.parse_args()
    data = Path(__file__).resolve().parents[1] / "data"
    render(data, args.out_dir)
    if args.png:
        fig = figure(data)
        fig.savefig(args.png, dpi=110)
        plt.close(fig)


if __name__ == "__main__":
    main()
