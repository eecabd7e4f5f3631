"""Draw superbiz's layers from the import-linter contract and the code's real imports.

The contract (``[tool.importlinter]`` in pyproject.toml, id ``layers``) is the one source:
``lint-imports`` enforces it in .ci/run, and this script writes it, with the imports that
actually cross each layer, into the marked blocks of docs/design.md (the drawing), and
README.md and docs/reference/layout.md (the one-line dependency summary).

    python tools/layers.py          # rewrite the blocks
    python tools/layers.py --check  # exit 1 when a block no longer matches the code
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "superbiz"
DRAWING = ("<!-- layers:begin (tools/layers.py) -->", "<!-- layers:end -->")
SUMMARY = ("<!-- dependencies:begin (tools/layers.py) -->", "<!-- dependencies:end -->")
WIDTH = 72


def contract_layers(pyproject: Path = ROOT / "pyproject.toml") -> list[list[str]]:
    """The layers contract, top first, each layer its modules (``a | b`` is two)."""
    config = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["importlinter"]
    (contract,) = (c for c in config["contracts"] if c.get("id") == "layers")
    return [[m.strip() for m in layer.split("|")] for layer in contract["layers"]]


def short(module: str) -> str:
    return module.removeprefix(PACKAGE + ".")


def _owner(module: str, layers: list[list[str]]) -> int | None:
    for index, layer in enumerate(layers):
        if any(module == m or module.startswith(m + ".") for m in layer):
            return index
    return None


def _floors(module: str, ordered: dict[str, list[str]]) -> list[str]:
    """A package layer's subpackages (its floors), e.g. knowledge's ``formats``: top first
    where a layers contract orders them (``containers``), else by name."""
    path = ROOT / "src" / Path(*module.split("."))
    if not path.is_dir():
        return []
    found = {
        p.name for p in path.iterdir() if (p / "__init__.py").is_file() and p.name != "migrations"
    }
    order = [f for f in ordered.get(module, []) if f in found]
    return [f + "/" for f in order + sorted(found - set(order))]


def floor_contracts(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, list[str]]:
    """Each container's floors, top first, from the layers contracts that name containers."""
    config = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["importlinter"]
    return {
        container: list(contract["layers"])
        for contract in config["contracts"]
        if contract.get("type") == "layers"
        for container in contract.get("containers", [])
    }


def draw(
    layers: list[list[str]], graph: grimp.ImportGraph, ordered: dict[str, list[str]] | None = None
) -> str:
    """One box a layer, top to bottom, its floors inside and, under it, the lower layers its
    code imports. Counts are left out on purpose: the drawing changes when a new kind of
    dependency appears, not with every import."""
    reaches: list[set[int]] = [set() for _ in layers]
    for module in graph.modules:
        source = _owner(module, layers)
        if source is None:
            continue
        for imported in graph.find_modules_directly_imported_by(module):
            target = _owner(imported, layers)
            if target is not None and target != source:
                reaches[source].add(target)
    out = []
    for index, layer in enumerate(layers):
        names, inside = [], []
        for module in layer:
            floors = _floors(module, ordered or {})
            if module in (ordered or {}):
                # floors in their contract's order, on a line of their own: top first
                names.append(short(module))
                inside.append("floors: " + " → ".join(floors))
            else:
                names.append(short(module) + (f" ({', '.join(floors)})" if floors else ""))
        out.append("┌" + "─" * (WIDTH - 2) + "┐")
        for line in [" · ".join(names), *inside]:
            out.append("│ " + line.ljust(WIDTH - 4) + " │")
        out.append("└" + "─" * (WIDTH - 2) + "┘")
        if index < len(layers) - 1:
            below = [" / ".join(short(m) for m in layers[t]) for t in sorted(reaches[index])]
            out.extend(
                textwrap.wrap(
                    "imports " + (", ".join(below) or "nothing below"),
                    WIDTH,
                    initial_indent="   ▼ ",
                    subsequent_indent="     ",
                )
            )
    return "\n".join(out)


def summary(layers: list[list[str]]) -> str:
    """The README's dependency line: each layer may import only those to its right."""
    line = " → ".join(" / ".join(short(m) for m in layer) for layer in layers)
    return "\n".join(textwrap.wrap(line, WIDTH, subsequent_indent="  ", break_on_hyphens=False))


def _replace(text: str, markers: tuple[str, str], body: str) -> str:
    begin, end = markers
    head, found, rest = text.partition(begin)
    if not found or end not in rest:
        raise SystemExit(f"markers {begin!r} … {end!r} not found")
    return head + begin + "\n" + body + "\n" + end + rest.partition(end)[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when a block is stale")
    args = parser.parse_args(argv)
    layers = contract_layers()
    graph = grimp.build_graph(PACKAGE)
    targets = {
        ROOT / "docs" / "design.md": (
            DRAWING,
            "```text\n" + draw(layers, graph, floor_contracts()) + "\n```",
        ),
        ROOT / "docs" / "reference" / "layout.md": (
            SUMMARY,
            "```text\n" + summary(layers) + "\n```",
        ),
        ROOT / "README.md": (SUMMARY, "```text\n" + summary(layers) + "\n```"),
    }
    stale = []
    for path, (markers, body) in targets.items():
        text = path.read_text(encoding="utf-8")
        new = _replace(text, markers, body)
        if new != text:
            stale.append(path.relative_to(ROOT))
            if not args.check:
                path.write_text(new, encoding="utf-8")
    if args.check and stale:
        print(f"stale, run python tools/layers.py: {', '.join(map(str, stale))}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
