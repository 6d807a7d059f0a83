"""A library's private name is spelled in one module only (issue 46 item 4).

Where no public name exists for a type we need (argparse's subparsers object), one module
gives it a name of ours and everything else uses that; a second spelling is how the same
type drifted into nine. ``ONE_HOME`` maps each such private name to the one file that may
spell it; every other hand-written ``*.py`` (tests included, this file excepted) may not.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ONE_HOME = {"_SubParsersAction": "src/vera/commands/__init__.py"}
NOT_SEARCHED = {".git", ".venv", "node_modules", ".pytest_cache", ".mypy_cache", "build",
                "dist"}


def spellings(name: str, files: list[Path]) -> list[Path]:
    """The files whose text names ``name``."""
    return sorted(f for f in files if name in f.read_text())


def python_files() -> list[Path]:
    here = Path(__file__).resolve()
    return [path for path in ROOT.rglob("*.py")
            if not NOT_SEARCHED.intersection(path.relative_to(ROOT).parts)
            and path.resolve() != here]


def test_a_second_spelling_is_found(tmp_path: Path) -> None:
    home = ROOT / ONE_HOME["_SubParsersAction"]
    other, clean = tmp_path / "other.py", tmp_path / "clean.py"
    other.write_text("def add_parser(commands: argparse._SubParsersAction) -> None: ...\n")
    clean.write_text("def add_parser(commands: Subcommands) -> None: ...\n")
    assert spellings("_SubParsersAction", [clean, home, other]) == sorted([home, other])


def test_each_private_name_is_spelled_in_its_one_home_only() -> None:
    files = python_files()
    assert ROOT / "src" / "vera" / "cli.py" in files
    found = {name: [str(f.relative_to(ROOT)) for f in spellings(name, files)]
             for name in ONE_HOME}
    assert found == {name: [home] for name, home in ONE_HOME.items()}
