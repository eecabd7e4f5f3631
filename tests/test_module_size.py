"""No module of the package outside the migrations is over 500 lines (issue 37): past that a
module holds two concepts, and the next change should split it along its seam."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "superbiz"
LIMIT = 500


def test_no_module_is_over_the_limit() -> None:
    sizes = {
        path.relative_to(PACKAGE).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in PACKAGE.rglob("*.py")
        if "migrations" not in path.parts
    }
    assert len(sizes) > 50, "the package was not found"
    over = {name: lines for name, lines in sorted(sizes.items()) if lines > LIMIT}
    assert not over, f"modules over {LIMIT} lines: {over}"
