"""Precision of each relevance level with its 95 % Wilson interval, per set, from
``docs/data/retrieval.json`` (``superbiz eval retrieval SET… -o FILE``); each bar is
labelled with its number of lookups.

Draws ``levels.svg``. ``python docs/plots/levels.py OUT_DIR`` draws it outside the site
build.
"""

from __future__ import annotations

import sys
from pathlib import Path

from _common import SETS, load, plt, save, set_name

LEVELS = ("PRECISE", "HIGHLY_RELEVANT", "REFERENCE")


def render(data_dir: Path, out_dir: Path) -> None:
    reports = {set_name(r["dataset"]): r for r in load(data_dir / "retrieval.json")["datasets"]}
    sets = [name for name in SETS if name in reports]
    figure, ax = plt.subplots(figsize=(8, 3.6))
    width = 0.26
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for offset, (level, colour) in enumerate(zip(LEVELS, colours, strict=False)):
        for index, name in enumerate(sets):
            stats = reports[name]["levels"].get(level, {})
            count = stats.get("count", 0)
            x = index + (offset - 1) * width
            if not count:
                ax.text(x, 0.02, "none", ha="center", va="bottom", fontsize=7, rotation=90)
                continue
            precision = stats["precision"]
            low, high = stats["precision_95"]
            ax.bar(x, precision, width, color=colour, label=level if index == 0 else None)
            ax.errorbar(
                x,
                precision,
                yerr=[[precision - low], [high - precision]],
                color="black",
                capsize=3,
                linewidth=1,
            )
            ax.text(
                x,
                0.02,
                f"n={count}",
                ha="center",
                va="bottom",
                fontsize=7,
                rotation=90,
                color="white",
            )
    ax.set_xticks(range(len(sets)), labels=sets)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("precision (gold document first)")
    ax.legend(loc="lower center", ncol=3, frameon=False, bbox_to_anchor=(0.5, -0.3))
    save(figure, out_dir / "levels.svg")


if __name__ == "__main__":
    render(Path(__file__).parent.parent / "data", Path(sys.argv[1]))
