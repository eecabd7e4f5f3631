"""Attribute docstrings (the string under a class attribute), read from the source.

Pydantic can read them itself (``use_attribute_docstrings``), but it parses the
module once per class at import: 75 ms on every command for the settings model. Only
the reference needs them, so it reads them here, one parse per module.
"""

from __future__ import annotations

import ast
import inspect
import sys
from functools import cache


def attribute_doc(owner: type, name: str) -> str:
    """The docstring under ``name`` in the class of ``owner``'s MRO that declares it;
    empty when it has none."""
    for cls in owner.__mro__:
        if name in inspect.get_annotations(cls):
            return _module_docs(cls.__module__).get((cls.__qualname__, name), "")
    return ""


@cache
def _module_docs(module: str) -> dict[tuple[str, str], str]:
    """``(class qualname, attribute) → docstring`` for every class of ``module``."""
    tree = ast.parse(inspect.getsource(sys.modules[module]))
    found: dict[tuple[str, str], str] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                qualname = f"{prefix}{node.name}"
                for statement, following in zip(node.body, [*node.body[1:], None], strict=True):
                    if (
                        isinstance(statement, ast.AnnAssign)
                        and isinstance(statement.target, ast.Name)
                        and isinstance(following, ast.Expr)
                        and isinstance(following.value, ast.Constant)
                        and isinstance(following.value.value, str)
                    ):
                        doc = inspect.cleandoc(following.value.value)
                        found[(qualname, statement.target.id)] = doc
                visit(node.body, f"{qualname}.")

    visit(tree.body, "")
    return found
