"""Evidence recall against executed lookups per question, for the governor (on), the
plain cap of 3 lookups (cap:3) and the ungoverned loop (off), per behaviour profile and
set: ``docs/data/agent-SET-PROFILE.json``, written by ``superbiz eval agent SET --profile
PROFILE --governance on,cap:3,off -o FILE``.

Draws ``agent.svg`` (one panel per set). ``python docs/plots/agent.py OUT_DIR`` draws it
outside the site build.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from _common import GOVERNANCE, SETS, load, plt, save, set_name

MARKERS = {"on": "o", "cap:3": "s", "off": "^"}
PROFILES = ("obedient", "over_cautious", "domain_hopper", "defiant")


def runs(data_dir: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """``set → profile → governance → run`` from every agent JSON there."""
    found: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for path in sorted(data_dir.glob("agent-*.json")):
        report = load(path)
        by_governance = {run["governance"]: run for run in report["runs"]}
        found[set_name(report["dataset"])][report["profile"]] = by_governance
    return found


def render(data_dir: Path, out_dir: Path) -> None:
    found = runs(data_dir)
    sets = [name for name in SETS if name in found]
    if not sets:
        raise SystemExit(f"no agent-*.json in {data_dir}")
    columns = 2 if len(sets) == 4 else len(sets)  # four sets: two rows of two
    rows = (len(sets) + columns - 1) // columns
    figure, grid = plt.subplots(
        rows, columns, figsize=(4.2 * columns, 3.4 * rows), sharey=True, squeeze=False
    )
    axes = [ax for row in grid for ax in row]
    colours = dict(zip(PROFILES, plt.rcParams["axes.prop_cycle"].by_key()["color"], strict=False))
    for ax, name in zip(axes, sets, strict=True):
        for profile in PROFILES:
            by_governance = found[name].get(profile)
            if not by_governance:
                continue
            points = [
                (by_governance[g]["executed_lookups_mean"], by_governance[g]["evidence_recall"], g)
                for g in GOVERNANCE
                if g in by_governance
            ]
            colour = colours[profile]
            ax.plot([p[0] for p in points], [p[1] for p in points], color=colour, alpha=0.4)
            for x, y, governance in points:
                # defiant plays over_cautious' paraphrases and lands on its points: hollow
                hollow = profile == "defiant"
                ax.scatter(
                    x,
                    y,
                    marker=MARKERS[governance],
                    s=70 if hollow else 36,
                    zorder=3,
                    facecolors="none" if hollow else colour,
                    edgecolors=colour,
                )
        ax.set_xscale("log")
        ax.set_xticks([1, 2, 3, 5, 10], labels=["1", "2", "3", "5", "10"])
        ax.set_title(name)
        ax.set_xlabel("executed lookups per question")
    for row in grid:
        row[0].set_ylabel("evidence recall")
    figure.tight_layout()
    handles = [
        plt.Line2D([], [], color=colours[p], marker="o", linestyle="", label=p)
        for p in PROFILES
        if any(p in found[name] for name in sets)
    ] + [
        plt.Line2D([], [], color="grey", marker=MARKERS[g], linestyle="", label=f"governance {g}")
        for g in GOVERNANCE
    ]
    figure.legend(
        handles=handles, loc="upper center", ncol=4, frameon=False, bbox_to_anchor=(0.5, 0.0)
    )
    save(figure, out_dir / "agent.svg")


if __name__ == "__main__":
    render(Path(__file__).parent.parent / "data", Path(sys.argv[1]))
