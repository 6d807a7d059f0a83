"""The caller table (vera.rpc.callers) against the protos and the code: each component is
allowed the methods its code calls, and every method of every service has a caller."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vera.identity.v1 import identity_pb2
from vera.knowledge.v1 import knowledge_service_pb2
from vera.retrieval.v1 import retrieval_pb2
from vera.rpc.callers import CLI, METHODS_BY_CALLER, may_call
from vera.snapshot.v1 import snapshot_pb2

ROOT = Path(__file__).resolve().parents[2]
METHODS = {
    f"/{service.full_name}/{method.name}"
    for module in (identity_pb2, knowledge_service_pb2, retrieval_pb2, snapshot_pb2)
    for service in module.DESCRIPTOR.services_by_name.values()
    for method in service.methods
}
# Where each component's calls are made (the fronts share the local-dev principal and the
# refusal reports).
SOURCES = {
    "gateway": ("gateway", "src/vera/local_principal.py", "src/vera/rpc/refusals.py"),
    "api": ("api", "src/vera/local_principal.py", "src/vera/rpc/refusals.py"),
    "retrieval": ("services/retrieval",),
    "snapshot": ("services/snapshot",),
}


def _files(paths: tuple[str, ...]) -> list[Path]:
    found: list[Path] = []
    for path in map(ROOT.joinpath, paths):
        found += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return found


def _called(paths: tuple[str, ...]) -> set[str]:
    """The RPC names this code calls on a stub (``<stub>.Name(``)."""
    names = {path.rsplit("/", 1)[1] for path in METHODS}
    text = "\n".join(file.read_text() for file in _files(paths) if "_pb2" not in file.name)
    return {name for name in re.findall(r"\.([A-Z]\w+)\(", text) if name in names}


@pytest.mark.parametrize("caller", sorted(SOURCES))
def test_each_component_is_allowed_the_methods_its_code_calls(caller) -> None:
    called = _called(SOURCES[caller])
    assert called, caller
    refused = {name for name in called
               if not any(may_call(caller, path) for path in METHODS
                          if path.endswith(f"/{name}"))}
    assert refused == set()


@pytest.mark.parametrize("caller", sorted(SOURCES))
def test_a_component_is_allowed_nothing_its_code_does_not_call(caller) -> None:
    allowed = {path.rsplit("/", 1)[1] for path in METHODS if may_call(caller, path)}
    assert allowed <= _called(SOURCES[caller])


def test_every_table_entry_names_a_real_method() -> None:
    for caller, services in METHODS_BY_CALLER.items():
        if caller == CLI:
            continue
        for service, methods in services.items():
            assert {f"/{service}/{m}" for m in methods} <= METHODS, caller


def test_the_services_read_only_what_they_index() -> None:
    """Retrieval and snapshot may read knowledge's log and facts, and call nothing else."""
    for caller in ("retrieval", "snapshot"):
        allowed = {path for path in METHODS if may_call(caller, path)}
        assert allowed and all(p.startswith("/vera.knowledge.v1.KnowledgeService/List")
                               or p.endswith("/BatchGetFacts") for p in allowed)


def test_the_cli_may_call_any_method_and_a_stranger_none() -> None:
    for path in METHODS:
        assert may_call(CLI, path), path
    assert not may_call("someone", sorted(METHODS)[0])
