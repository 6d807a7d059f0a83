"""Function-local imports outside tests only ever get fewer (issue 46 item 4).

Imports belong at the top of a module (CONTRIBUTING.md, Code rules); a function may import
only an optional extra its caller may not have installed. The count
of imports inside functions, lambdas included, across the hand-written code (every ``*.py``
outside tests/, the generated ``src/vera/*/v1/`` and installed trees, plus the Python
scripts under scripts/) may not exceed ``CEILING``.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Lower it, never raise it: when the count drops, set it to the count the failure names.
CEILING = 235
NOT_SEARCHED = {"tests", ".git", ".venv", "node_modules", ".pytest_cache", ".mypy_cache",
                "build", "dist"}
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def local_imports(source: str, name: str = "<source>") -> int:
    """How many import statements ``source`` holds inside a function or lambda."""
    count = 0
    pending: list[tuple[ast.AST, bool]] = [(ast.parse(source, name), False)]
    while pending:
        node, inside = pending.pop()
        for child in ast.iter_child_nodes(node):
            if inside and isinstance(child, ast.Import | ast.ImportFrom):
                count += 1
            pending.append((child, inside or isinstance(child, FUNCTIONS)))
    return count


def generated(path: Path) -> bool:
    parts = path.relative_to(ROOT).parts
    return parts[:2] == ("src", "vera") and len(parts) > 3 and parts[3] == "v1"


def hand_written_modules() -> list[Path]:
    modules = [path for path in ROOT.rglob("*.py")
               if not NOT_SEARCHED.intersection(path.relative_to(ROOT).parts)
               and not generated(path)]
    scripts = [path for path in (ROOT / "scripts").iterdir()
               if path.is_file() and path.suffix == ""
               and path.read_text().startswith("#!/usr/bin/env python")]
    return sorted(modules + scripts)


def test_the_counter_counts_imports_inside_functions_only() -> None:
    source = (
        "import os\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import json\n"
        "def f():\n    import re\n    def g():\n        from a import b\n"
        "class C:\n    import sys\n    async def m(self):\n        import x, y\n"
    )
    assert local_imports(source) == 3


def test_function_local_imports_outside_tests_never_grow() -> None:
    modules = hand_written_modules()
    assert len(modules) > 100
    assert ROOT / "src" / "vera" / "config.py" in modules
    assert not [m for m in modules if "tests" in m.relative_to(ROOT).parts or generated(m)]
    counts = Counter({str(m.relative_to(ROOT)): local_imports(m.read_text(), str(m))
                      for m in modules})
    total = sum(counts.values())
    most = ", ".join(f"{path} {n}" for path, n in counts.most_common(5))
    assert total <= CEILING, (
        f"{total} function-local imports outside tests, more than the ceiling {CEILING}: "
        f"move the new one to the top of its module (only an optional extra may stay "
        f"local, with a comment saying which). Most: {most}")
    assert total == CEILING, (
        f"{total} function-local imports, fewer than the ceiling {CEILING}: lower CEILING "
        f"in tests/unit/test_local_imports.py to {total} so they cannot come back")
