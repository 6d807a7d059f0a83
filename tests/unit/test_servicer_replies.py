"""Servicers build their responses only; every message inside one is built by the
service's ``convert.py`` (issue 46 item 1), so one view has one wire shape.

A servicer module is one under services/ that declares an RPC handler (an async method
taking ``self, request, context``): the four services' servicers and their RPC groups."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ROOT / "services"


def inline_messages(source: str) -> list[str]:
    """The messages (``pb.<Message>(...)``, ``<x>_pb2.<Message>(...)``) built in
    ``source`` that are not a ``...Response``."""
    return [node.func.attr for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and (node.func.value.id == "pb" or node.func.value.id.endswith("_pb2"))
            and node.func.attr[:1].isupper() and not node.func.attr.endswith("Response")]


def _is_servicer(source: str) -> bool:
    return any(isinstance(node, ast.AsyncFunctionDef)
               and [a.arg for a in node.args.args] == ["self", "request", "context"]
               for node in ast.walk(ast.parse(source)))


def test_the_check_sees_a_message_built_inline() -> None:
    source = ("def f(v):\n    return pb.GetResponse(item=pb.Item(x=v), n=pb.FACT_STATE_ACTIVE,"
              " m=retrieval_pb2.RankModel())\n")
    assert inline_messages(source) == ["Item", "RankModel"]


def test_servicers_build_only_their_responses() -> None:
    servicers = [p for p in sorted(SERVICES.rglob("*.py")) if _is_servicer(p.read_text())]
    names = {str(p.relative_to(SERVICES)) for p in servicers}
    assert names >= {"identity/api.py", "snapshot/api.py", "knowledge/facts_api.py",
                     "knowledge/erasure_api.py", "retrieval/serving/rank_api.py"}
    found = {name: inline_messages((SERVICES / name).read_text()) for name in names}
    assert found == {name: [] for name in names}


def unannotated_handlers(source: str) -> list[str]:
    """The RPC handlers not declared ``async def Name(self, request: <pb>.NameRequest,
    context) -> <pb>.NameResponse``: the one style of every servicer."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.AsyncFunctionDef)
                and [a.arg for a in node.args.args] == ["self", "request", "context"]):
            continue
        request, returns = node.args.args[1].annotation, node.returns
        if not (isinstance(request, ast.Attribute) and request.attr == f"{node.name}Request"
                and isinstance(returns, ast.Attribute)
                and returns.attr == f"{node.name}Response"):
            found.append(node.name)
    return found


def test_the_style_check_sees_a_bare_handler() -> None:
    source = ("class A:\n    async def Get(self, request, context):\n        pass\n"
              "    async def Put(self, request: pb.PutRequest, context) -> pb.PutResponse:\n"
              "        pass\n")
    assert unannotated_handlers(source) == ["Get"]


def test_every_handler_names_its_request_and_response() -> None:
    servicers = [p for p in sorted(SERVICES.rglob("*.py")) if _is_servicer(p.read_text())]
    found = {str(p.relative_to(SERVICES)): unannotated_handlers(p.read_text())
             for p in servicers}
    assert found == {name: [] for name in found}
