"""THIRD_PARTY_NOTICES.md names exactly what the project declares and loads (issue 46 item 5).

A dependency added to any extra of pyproject.toml, an npm tool added to a test's manifest,
or a model or data set the code loads fails here until the notice states its licence; a
row for something no longer declared or loaded fails too.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from vera.services.retrieval.models.embedding import WEIGHTS_PACKAGE

ROOT = Path(__file__).resolve().parents[2]
NOTICE = ROOT / "THIRD_PARTY_NOTICES.md"
SELF = "vera-memory"
NOT_SEARCHED = {".git", ".venv", "node_modules", ".pytest_cache", ".mypy_cache"}
CODE = re.compile(r"`([^`]+)`")
# bench/ is a top-level folder outside the package: its data file is read from the source.
BENCH_DATA = re.compile(r'^DEFAULT_DATA = .*"([^"]+)"$', re.MULTILINE)


def code(cell: str) -> str:
    """The one name a cell shows as code."""
    match = CODE.fullmatch(cell)
    assert match is not None, f"not one `name`: {cell}"
    return match.group(1)


def table(heading: str, text: str | None = None) -> list[list[str]]:
    """The body rows of the first table under ``## heading``, each a list of cells."""
    text = NOTICE.read_text() if text is None else text
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def declared_python() -> dict[str, list[str]]:
    """Every dependency of every extra, canonical name -> the groups declaring it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    groups = {"client": project["dependencies"], **project["optional-dependencies"]}
    declared: dict[str, list[str]] = {}
    for group, requirements in groups.items():
        for requirement in requirements:
            name = canonicalize_name(Requirement(requirement).name)
            if name != SELF:
                declared.setdefault(name, []).append(group)
    return declared


def npm_manifests() -> list[Path]:
    found = []
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [s for s in subfolders if s not in NOT_SEARCHED]
        if "package.json" in files:
            found.append(Path(folder, "package.json"))
    return sorted(found)


def test_the_table_reader_reads_rows_under_their_heading() -> None:
    page = "# t\n\n## A\n\n| x | y |\n|---|---|\n| `a` | 1 |\n\n## B\n\n| x |\n|---|\n| b |\n"
    assert table("A", page) == [["`a`", "1"]]
    assert table("B", page) == [["b"]]


def test_every_python_dependency_is_named_with_the_groups_declaring_it() -> None:
    declared = declared_python()
    assert len(declared) > 50
    rows = table("Python dependencies")
    named = {canonicalize_name(code(row[0])): row for row in rows}
    assert len(named) == len(rows), "a package is named twice"
    assert sorted(set(declared) - set(named)) == [], "declared, missing from the notice"
    assert sorted(set(named) - set(declared)) == [], "in the notice, no longer declared"
    wrong = {name: row[1] for name, row in named.items() if row[1] != ", ".join(declared[name])}
    assert wrong == {}
    assert [row[0] for row in rows if not row[2]] == []


def test_every_npm_tool_a_test_installs_is_named_with_its_manifest() -> None:
    manifests = npm_manifests()
    assert len(manifests) >= 3
    installed = {(name, str(manifest.relative_to(ROOT)))
                 for manifest in manifests
                 for name in json.loads(manifest.read_text()).get("dependencies", {})}
    named = {(code(row[0]), code(row[2])) for row in table("npm tools the tests install")}
    assert sorted(installed - named) == [], "installed, missing from the notice"
    assert sorted(named - installed) == [], "in the notice, no longer installed"


def test_every_model_and_data_set_the_code_loads_is_named() -> None:
    bench_data = BENCH_DATA.search((ROOT / "bench" / "harness.py").read_text())
    assert bench_data is not None
    loaded = {WEIGHTS_PACKAGE, bench_data.group(1)}
    rows = table("Models and data")
    names = [set(CODE.findall(row[0])) for row in rows]
    assert sorted(artifact for artifact in loaded
                  if not any(artifact in row for row in names)) == []
    assert [row for row in names if not row & loaded] == [], "a row names nothing loaded"
    assert all(row[1] for row in rows)
