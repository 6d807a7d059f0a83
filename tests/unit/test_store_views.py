"""Stores return views; they do not declare them (issue 46 item 1): every public dataclass
a store returns lives with the rules (the service's ``domain.py``; knowledge's graph views
in ``graph.py``), so the servicers and ``convert.py`` import views from one
place and a store can be replaced without moving a type."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STORES = sorted((ROOT / "services").rglob("*store.py"))


def public_dataclasses(source: str) -> list[str]:
    def is_dataclass(decorator: ast.expr) -> bool:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        return (isinstance(target, ast.Name) and target.id == "dataclass") or (
            isinstance(target, ast.Attribute) and target.attr == "dataclass")

    return [node.name for node in ast.parse(source).body
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_")
            and any(map(is_dataclass, node.decorator_list))]


def test_the_check_sees_a_view_declared_in_a_store() -> None:
    source = ("@dataclass(frozen=True)\nclass RowView:\n    x: int\n"
              "@dataclasses.dataclass\nclass _Private:\n    y: int\n"
              "class Store:\n    pass\n")
    assert public_dataclasses(source) == ["RowView"]


def test_stores_declare_no_views() -> None:
    assert len(STORES) >= 15
    found = {str(p.relative_to(ROOT)): public_dataclasses(p.read_text()) for p in STORES}
    assert found == {name: [] for name in found}
