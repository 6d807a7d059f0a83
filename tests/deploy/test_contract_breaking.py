"""`buf breaking` against the committed baseline image protos/baseline.binpb (offline).

A proto change that breaks generated code or wire compatibility fails CI until the
baseline is rebuilt on purpose (docs/deploy.md, Contract checks in CI). The rule tests below
change a copy of the contract against an image of that same copy, so they pin how the
configured category judges a change whatever the current contract is.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from deploy_manifests import ROOT

BUF = ROOT / ".venv" / "bin" / "buf"
BASELINE = ROOT / "protos" / "baseline.binpb"
FIELD = re.compile(r"^\s+[\w.]+ \w+ = \d+;.*\n", re.MULTILINE)


def _breaking(workdir: Path, against: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BUF), "breaking", "--against", str(against), "--error-format", "json"],
        cwd=workdir, capture_output=True, text=True, timeout=60,
    )


def _rules(result: subprocess.CompletedProcess) -> set[str]:
    return {json.loads(line)["type"] for line in result.stdout.splitlines() if line}


@pytest.fixture
def contract(tmp_path) -> tuple[Path, Path]:
    """A copy of the module (buf.yaml and protos/) to change, and an image of it as is."""
    module = tmp_path / "module"
    module.mkdir()
    shutil.copy(ROOT / "buf.yaml", module / "buf.yaml")
    shutil.copytree(ROOT / "protos", module / "protos")
    image = tmp_path / "before.binpb"
    subprocess.run([str(BUF), "build", "-o", str(image)], cwd=module, check=True,
                   capture_output=True, timeout=60)
    return module, image


def _protos(module: Path) -> list[Path]:
    return sorted(p for p in (module / "protos").rglob("*.proto") if FIELD.search(p.read_text()))


def test_the_current_contract_is_compatible_with_the_baseline() -> None:
    result = _breaking(ROOT, BASELINE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_removing_a_field_fails(contract) -> None:
    module, before = contract
    proto = _protos(module)[0]
    proto.write_text(FIELD.sub("", proto.read_text(), count=1))
    result = _breaking(module, before)
    assert result.returncode != 0
    assert _rules(result) == {"FIELD_NO_DELETE"}


def test_renumbering_a_field_fails(contract) -> None:
    module, before = contract
    proto = _protos(module)[-1]
    text = proto.read_text()
    first = FIELD.search(text)
    renumbered = re.sub(r"= (\d+);", "= 999;", first.group(0), count=1)
    proto.write_text(text[: first.start()] + renumbered + text[first.end():])
    assert _breaking(module, before).returncode != 0


def test_an_additive_change_passes(contract) -> None:
    module, before = contract
    proto = _protos(module)[0]
    proto.write_text(proto.read_text() + "\nmessage AddedForTheTest {\n  string note = 1;\n}\n")
    result = _breaking(module, before)
    assert result.returncode == 0, result.stdout + result.stderr
