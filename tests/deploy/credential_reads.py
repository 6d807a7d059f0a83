"""Which credentials a VERA process reads, found from the code rather than listed by hand.

A credential is a ``SecretStr`` setting (deploy_manifests.secret_settings); a process reads
it where code it runs accesses that setting's attribute (``settings.database.dsn``,
``rpc.auth_key``). The code a command runs:

- ``python -m <module>``: that module;
- ``vera <command> [arg]``: the command's module that ``vera.cli.COMMANDS`` names and the
  modules it imports (an ``importlib.import_module`` f-string is formatted with the
  command's argument: ``vera serve identity`` runs ``vera.services.identity.server``);

and, from there, every first-party module those import (at module level or inside a
function: a lazy import still runs). ``vera.config`` is left out: it is the settings model
itself, whose validators look at every field in every process.
"""

from __future__ import annotations

import ast
import importlib.util
from functools import cache
from pathlib import Path

from deploy_manifests import secret_settings

from vera import cli

FIRST_PARTY = "vera"
SETTINGS_MODULE = "vera.config"


def reads(argv: list[str]) -> frozenset[str]:
    """The VERA_* credential variables the process ``argv`` reads."""
    fields = {name: variable for variable, name in secret_settings().items()}
    attributes, modules = _entry(tuple(argv))
    for module in _reachable(modules):
        attributes |= _module_scan(module)[0]
    return frozenset(fields[a] for a in attributes if a in fields)


def _entry(argv: tuple[str, ...]) -> tuple[set[str], set[str]]:
    """Attributes accessed and modules imported by the code ``argv`` starts in."""
    if argv[:2] == ("python", "-m"):
        return set(), {argv[2]}
    assert argv[0] == "vera", argv
    positional = next((a for a in argv[2:] if not a.startswith("-")), "")
    module = cli.COMMANDS[argv[1]]
    path = _path(module)
    assert path is not None, module
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return _attributes(tree), set(_imports(tree, module.rpartition(".")[0], positional))


def _reachable(roots: set[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        module = todo.pop()
        if module in seen or _path(module) is None:
            continue
        seen.add(module)
        todo += _module_scan(module)[1]
    return seen - {SETTINGS_MODULE}


@cache
def _path(module: str) -> Path | None:
    if module.split(".")[0] != FIRST_PARTY:
        return None
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


@cache
def _module_scan(module: str) -> tuple[frozenset[str], tuple[str, ...]]:
    path = _path(module)
    assert path is not None
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    return frozenset(_attributes(tree)), tuple(_imports(tree, package, ""))


def _attributes(tree: ast.AST) -> set[str]:
    return {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}


def _imports(tree: ast.AST, package: str, positional: str) -> list[str]:
    """Modules named by imports (``from a import b``: ``a`` and ``a.b``, which may be
    either) and by ``importlib.import_module`` with a constant or an f-string."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found += [base, *(f"{base}.{alias.name}" for alias in node.names)]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args):
            argument = node.args[0]
            if isinstance(argument, ast.Constant):
                found.append(argument.value)
            elif isinstance(argument, ast.JoinedStr):
                found.append("".join(part.value if isinstance(part, ast.Constant) else positional
                                     for part in argument.values))
    return found
