"""The wheel a non-editable install (the image, `pip install vera-memory`) is built from
holds every file of the package tree: each module, each service's SQL migrations, the
console's templates and assets, the integration kit's templates. An editable checkout
finds them in place, so nothing else in the suite would notice one missing."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from checkout import copy_sources

ROOT = Path(__file__).resolve().parents[2]
# Where each source folder lands in the wheel (pyproject.toml's package-dir).
PACKAGE_DIRS = {"src/vera/": "vera/", "services/": "vera/services/",
                "gateway/": "vera/gateway/", "api/": "vera/api/"}


def _in_wheel(path: str) -> str:
    source = next(prefix for prefix in PACKAGE_DIRS if path.startswith(prefix))
    return PACKAGE_DIRS[source] + path[len(source):]


def test_every_file_of_the_package_tree_is_in_the_wheel(tmp_path: Path) -> None:
    # From a copy, as the Dockerfile builds: a checkout's build/ keeps files from earlier
    # builds that the package data no longer names.
    sources = copy_sources(tmp_path / "sources")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(tmp_path), str(sources)],
        check=True, capture_output=True, timeout=600,
    )
    (wheel,) = tmp_path.glob("vera_memory-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    tracked = subprocess.run(
        ["git", "ls-files", *PACKAGE_DIRS], cwd=ROOT, check=True, capture_output=True,
        text=True,
    ).stdout.split()
    assert any(path.endswith(".sql") for path in tracked)
    assert [path for path in tracked if _in_wheel(path) not in shipped] == []
