"""The layering contract (pyproject.toml ``[tool.importlinter]``) holds, catches a violation,
and the drawings made from it (docs/design.md, README.md) match the code."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import layers  # noqa: E402


def _lint(src: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    lint = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(lint), "--no-logo", str(ROOT / "pyproject.toml")],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_package_keeps_its_contracts() -> None:
    result = _lint(ROOT / "src")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout


def test_an_upward_import_breaks_the_layers(tmp_path: Path) -> None:
    copy = tmp_path / "src"
    shutil.copytree(
        ROOT / "src" / "superbiz",
        copy / "superbiz",
        ignore=shutil.ignore_patterns("__pycache__", "static", "examples"),
    )
    db = copy / "superbiz" / "storage" / "db.py"
    db.write_text(
        db.read_text(encoding="utf-8") + "\nimport superbiz.agents.runtime  # deliberate\n"
    )
    result = _lint(copy)
    assert result.returncode == 1
    assert "superbiz.storage is not allowed to import superbiz.agents" in result.stdout
    assert "superbiz.storage.db -> superbiz.agents.runtime" in result.stdout


def test_a_library_past_its_gate_breaks_the_contract(tmp_path: Path) -> None:
    copy = tmp_path / "src"
    shutil.copytree(
        ROOT / "src" / "superbiz",
        copy / "superbiz",
        ignore=shutil.ignore_patterns("__pycache__", "static", "examples"),
    )
    planner = copy / "superbiz" / "agents" / "planner.py"
    planner.write_text(planner.read_text(encoding="utf-8") + "\nimport milvus_lite  # deliberate\n")
    result = _lint(copy)
    assert result.returncode == 1
    assert "superbiz.agents.planner -> milvus_lite" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        # a span written in the loop: tracing is a wrapper around the model (agents.tracing)
        (
            "agents/executor.py",
            "from opentelemetry import trace  # deliberate",
            "superbiz.agents.executor -> opentelemetry",
        ),
        # a Lite internal reached past the gate (retrieval._lite's InProcessLite)
        (
            "retrieval/vector_store.py",
            "from superbiz.retrieval._lite.search import search_dense  # deliberate",
            "superbiz.retrieval.vector_store -> superbiz.retrieval._lite.search",
        ),
    ],
)
def test_tracing_and_lite_internals_stay_behind_their_modules(
    tmp_path: Path, module: str, line: str, broken: str
) -> None:
    copy = tmp_path / "src"
    shutil.copytree(
        ROOT / "src" / "superbiz",
        copy / "superbiz",
        ignore=shutil.ignore_patterns("__pycache__", "static", "examples"),
    )
    path = copy / "superbiz" / module
    path.write_text(path.read_text(encoding="utf-8") + f"\n{line}\n")
    result = _lint(copy)
    assert result.returncode == 1
    assert broken in result.stdout


def test_the_drawings_match_the_code() -> None:
    assert layers.main(["--check"]) == 0, "run: python tools/layers.py"


def test_every_layer_has_its_paragraph() -> None:
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    for layer in layers.contract_layers():
        heading = "### " + " · ".join(layers.short(m) for m in layer)
        assert heading in design, f"docs/design.md lacks a paragraph headed {heading!r}"
