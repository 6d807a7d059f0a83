"""The wheel a non-editable install (the image, `pip install vera-memory`) is built from
holds every file of the package tree: each module, each service's SQL migrations, the
console's templates and assets, the integration kit's templates. An editable checkout
finds them in place, so nothing else in the suite would notice one missing."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from checkout import copy_sources

ROOT = Path(__file__).resolve().parents[2]
# Where each source folder lands in the wheel (pyproject.toml's package-dir).
PACKAGE_DIRS = {"src/vera/": "vera/", "services/": "vera/services/",
                "gateway/": "vera/gateway/", "api/": "vera/api/"}


def _in_wheel(path: str) -> str:
    source = next(prefix for prefix in PACKAGE_DIRS if path.startswith(prefix))
    return PACKAGE_DIRS[source] + path[len(source):]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The wheel, built from a copy as the Dockerfile builds (a checkout's build/ keeps files
    from earlier builds that the package data no longer names), and the build's output."""
    out = tmp_path_factory.mktemp("wheel")
    sources = copy_sources(out / "sources")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(out), str(sources)],
        check=True, capture_output=True, text=True, timeout=600,
    )
    (wheel,) = out.glob("vera_memory-*.whl")
    return wheel, done.stdout + done.stderr


def test_every_file_of_the_package_tree_is_in_the_wheel(built: tuple[Path, str]) -> None:
    wheel, _ = built
    shipped = set(zipfile.ZipFile(wheel).namelist())
    tracked = subprocess.run(
        ["git", "ls-files", *PACKAGE_DIRS], cwd=ROOT, check=True, capture_output=True,
        text=True,
    ).stdout.split()
    assert any(path.endswith(".sql") for path in tracked)
    assert [path for path in tracked if _in_wheel(path) not in shipped] == []


def test_the_build_warns_of_no_data_folder(built: tuple[Path, str]) -> None:
    # Each data folder setuptools was not told about printed a 30-line warning on the first
    # `scripts/up`, 7 of them: a new user's first screen.
    _, output = built
    assert "BuildBackendWarning" not in output
