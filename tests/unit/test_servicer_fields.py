"""Every servicer reads its request fields through one home (issue 46 item 1): ids and
page sizes ``vera.request_fields``, timestamps ``vera.rpc.timestamps.from_timestamp``.

A servicer module is one under services/ that declares an RPC handler (an async method
taking ``self, request, context``); ``src/vera/rpc`` holds code the servicers share. None
of them calls ``uuid.UUID`` or holds an ``assert`` (a client's bad input is
``invalid_input`` naming the field; a broken invariant raises its own error, and neither
may vanish under ``python -O``); no servicer reads a Timestamp itself (``ToDatetime``).
Nowhere under services/ or ``src/vera/rpc`` does code catch ``uuid.UUID``'s ValueError
itself: that is ``vera.request_fields``' job.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SEARCHED = (ROOT / "services", ROOT / "src" / "vera" / "rpc")


def _modules() -> list[Path]:
    return sorted(p for folder in SEARCHED for p in folder.rglob("*.py")
                  if "v1" not in p.relative_to(ROOT).parts)


def _is_handler(node: ast.AST) -> bool:
    return isinstance(node, ast.AsyncFunctionDef) and [
        a.arg for a in node.args.args] == ["self", "request", "context"]


def _parses_uuid(node: ast.AST) -> bool:
    """A call of ``uuid.UUID`` / ``UUID`` on anything but a literal."""
    if not isinstance(node, ast.Call) or not node.args:
        return False
    func = node.func
    named = (isinstance(func, ast.Attribute) and func.attr == "UUID") or (
        isinstance(func, ast.Name) and func.id == "UUID")
    return named and not isinstance(node.args[0], ast.Constant)


def _catches_a_uuid_parse(node: ast.AST) -> bool:
    return isinstance(node, ast.Try) and any(
        _parses_uuid(inner) for statement in node.body for inner in ast.walk(statement))


def findings(source: str, name: str, shared: bool = False) -> list[str]:
    tree = ast.parse(source, name)
    nodes = list(ast.walk(tree))
    servicer = shared or any(_is_handler(n) for n in nodes)
    found = []
    for node in nodes:
        line = getattr(node, "lineno", 0)
        if _catches_a_uuid_parse(node):
            found.append(f"{name}:{line}: parses a UUID itself")
        if servicer and isinstance(node, ast.Assert):
            found.append(f"{name}:{line}: assert in a servicer")
        if servicer and _parses_uuid(node):
            found.append(f"{name}:{line}: uuid.UUID in a servicer")
        if servicer and shared is False and isinstance(node, ast.Attribute) \
                and node.attr == "ToDatetime":
            found.append(f"{name}:{line}: reads a Timestamp itself")
    return sorted(found, key=lambda f: int(f.split(":")[1]))


def test_the_check_finds_what_it_forbids() -> None:
    source = (
        "import uuid\n"
        "def ok():\n    return uuid.UUID('00000000-0000-0000-0000-000000000000')\n"
        "def own(v):\n    try:\n        return uuid.UUID(v)\n    except ValueError:\n"
        "        return None\n"
        "class Api:\n    async def Get(self, request, context):\n"
        "        assert request.x\n        return UUID(request.id)\n"
        "    async def At(self, request, context):\n        return request.at.ToDatetime()\n"
    )
    assert findings(source, "m.py") == [
        "m.py:5: parses a UUID itself", "m.py:6: uuid.UUID in a servicer",
        "m.py:11: assert in a servicer", "m.py:12: uuid.UUID in a servicer",
        "m.py:14: reads a Timestamp itself"]
    assert findings("def f(x):\n    assert x\n", "m.py") == []
    assert findings("def f(x):\n    assert x\n", "m.py", shared=True) == [
        "m.py:2: assert in a servicer"]


def test_servicers_parse_fields_only_through_request_fields() -> None:
    modules = _modules()
    servicers = [p for p in modules if any(map(_is_handler, ast.walk(ast.parse(p.read_text()))))]
    # The four services' servicers and knowledge's and retrieval's RPC groups are found.
    assert len(servicers) >= 9, servicers
    found = [f for p in modules for f in findings(
        p.read_text(), str(p.relative_to(ROOT)), shared=ROOT / "src" in p.parents)]
    assert found == []
