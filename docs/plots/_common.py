"""What the plot scripts share: reading the benchmark JSON, the four sets' order, and a
plain style that renders the same offline everywhere (SVG, text as text, no date)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: the site is built headless

import matplotlib.pyplot as plt

#: the benchmark sets in the order every table gives them
SETS = ("dev", "dev-answer-only", "dev2", "dev2-answer-only")
GOVERNANCE = ("on", "cap:3", "off")

plt.rcParams.update(
    {
        "svg.fonttype": "none",  # text stays text: small files, the reader's fonts
        "svg.hashsalt": "superbiz",  # the same SVG for the same data
        "font.family": "sans-serif",
        "font.size": 10,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "grid.alpha": 0.3,
    }
)


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def set_name(dataset: str) -> str:
    """``../shared/bench/dev2`` → ``dev2``."""
    return Path(dataset).name


def save(figure: Any, path: Path) -> None:
    figure.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(figure)
