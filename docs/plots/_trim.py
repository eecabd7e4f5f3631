"""Keep a benchmark report's numbers, drop its per-question rows (megabytes that no plot
reads): ``python docs/plots/_trim.py REPORT.json docs/data/NAME.json``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

BULK = {"per_question", "per_query"}


def trimmed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: trimmed(v) for k, v in value.items() if k not in BULK}
    if isinstance(value, list):
        return [trimmed(item) for item in value]
    return value


if __name__ == "__main__":
    source, target = Path(sys.argv[1]), Path(sys.argv[2])
    report = trimmed(json.loads(source.read_text(encoding="utf-8")))
    target.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
