"""`buf breaking` against the committed baseline image protos/baseline.binpb (offline).

A proto change that breaks generated code or wire compatibility fails CI until the
baseline is rebuilt on purpose (README, Deploy: refresh the contract baseline).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from deploy_manifests import ROOT

BUF = ROOT / ".venv" / "bin" / "buf"
BASELINE = ROOT / "protos" / "baseline.binpb"
FIELD = re.compile(r"^\s+[\w.]+ \w+ = \d+;.*\n", re.MULTILINE)


def _breaking(workdir) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BUF), "breaking", "--against", str(BASELINE), "--error-format", "json"],
        cwd=workdir, capture_output=True, text=True, timeout=60,
    )


@pytest.fixture
def contract(tmp_path):
    """A copy of the module (buf.yaml and protos/) to change."""
    shutil.copy(ROOT / "buf.yaml", tmp_path / "buf.yaml")
    shutil.copytree(ROOT / "protos", tmp_path / "protos")
    return tmp_path


def test_the_current_contract_is_compatible_with_the_baseline() -> None:
    result = _breaking(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_removing_a_field_fails(contract) -> None:
    proto = contract / "protos" / "vera" / "identity" / "v1" / "identity.proto"
    text = proto.read_text()
    proto.write_text(FIELD.sub("", text, count=1))
    assert proto.read_text() != text
    result = _breaking(contract)
    assert result.returncode != 0
    rules = {json.loads(line)["type"] for line in result.stdout.splitlines()}
    assert rules == {"FIELD_NO_DELETE"}


def test_renumbering_a_field_fails(contract) -> None:
    proto = contract / "protos" / "vera" / "knowledge" / "v1" / "knowledge.proto"
    text = proto.read_text()
    first = FIELD.search(text)
    renumbered = re.sub(r"= (\d+);", "= 999;", first.group(0), count=1)
    proto.write_text(text[: first.start()] + renumbered + text[first.end():])
    assert _breaking(contract).returncode != 0


def test_an_additive_change_passes(contract) -> None:
    proto = contract / "protos" / "vera" / "snapshot" / "v1" / "snapshot.proto"
    proto.write_text(proto.read_text() + "\nmessage AddedForTheTest {\n  string note = 1;\n}\n")
    result = _breaking(contract)
    assert result.returncode == 0, result.stdout + result.stderr
