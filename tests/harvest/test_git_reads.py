"""What a harvest reads from git, in the clones developers really have: a partial or
sparse clone lacks the content of files it never checked out, and a repository may lack
an object outright. A harvest needs only the files some extractor reads, so it works
when those are present and stops with a GitError (the CLI's exit 2) when one is not:
read as absent, its facts would be closed as vanished."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from git_fixtures import IDENTITY, FixtureRepo

from vera.harvest import drift, harvester
from vera.harvest.git import Checkout, GitError

PYPROJECT = '[project]\nname = "payments-api"\nversion = "1.4.2"\n'
COMPOSE = "services:\n  db:\n    image: postgres:16\n"


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def origin(tmp_path: Path) -> FixtureRepo:
    repo = FixtureRepo(tmp_path / "origin")
    repo.commit({"pyproject.toml": PYPROJECT, "assets/logo.bin": "not a manifest\n" * 50,
                 "services/db/compose.yaml": COMPOSE})
    repo.git("config", "uploadpack.allowFilter", "true")
    repo.git("config", "uploadpack.allowAnySHA1InWant", "true")
    return repo


def sparse_blobless_clone(origin: FixtureRepo, target: Path) -> Path:
    """`git clone --filter=blob:none --sparse`: the root's files are fetched and checked
    out, every folder's files are listed in the tree but absent."""
    git("clone", "-q", "--filter=blob:none", "--sparse", f"file://{origin.root}", str(target))
    return target


def predicates(harvest: harvester.Harvest) -> set[tuple[str, str]]:
    return {(f.path, f.predicate) for f in harvest.facts}


def test_a_partial_clone_holding_the_files_a_harvest_reads_is_harvested(
        origin: FixtureRepo, tmp_path: Path) -> None:
    clone = sparse_blobless_clone(origin, tmp_path / "clone")
    git("-C", str(clone), "sparse-checkout", "set", "services/db")

    harvest = harvester.harvest_checkout(clone, repository=IDENTITY)

    assert ("pyproject.toml", "version") in predicates(harvest)
    assert ("services/db/compose.yaml", "uses_image") in predicates(harvest)


def test_a_partial_clone_lacking_a_file_a_harvest_reads_is_refused(
        origin: FixtureRepo, tmp_path: Path) -> None:
    clone = sparse_blobless_clone(origin, tmp_path / "clone")  # services/db is not fetched

    with pytest.raises(GitError):
        harvester.harvest_checkout(clone, repository=IDENTITY)
    # Nor is the compose file's cited line reported gone: drift cannot say.
    checkout = Checkout(clone)
    with pytest.raises(GitError):
        drift.lines_at(checkout, checkout.commit().id, {"services/db/compose.yaml"})


def remove_object(repo: FixtureRepo, path: str) -> None:
    object_id = repo.git("rev-parse", f"HEAD:{path}").strip()
    (repo.root / ".git" / "objects" / object_id[:2] / object_id[2:]).unlink()


def test_an_object_missing_from_the_repository_stops_only_a_harvest_that_reads_it(
        tmp_path: Path) -> None:
    repo = FixtureRepo(tmp_path / "repo")
    repo.commit({"pyproject.toml": PYPROJECT, "docs/screenshot.gif": "GIF89a\n",
                 "compose.yaml": COMPOSE})

    remove_object(repo, "docs/screenshot.gif")  # no extractor reads it
    harvest = harvester.harvest_checkout(repo.root)
    assert ("compose.yaml", "uses_image") in predicates(harvest)

    remove_object(repo, "compose.yaml")
    with pytest.raises(GitError):
        harvester.harvest_checkout(repo.root)


def test_what_a_harvest_holds_at_once_is_bounded_in_bytes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = FixtureRepo(tmp_path / "repo")
    repo.commit({"a/pyproject.toml": PYPROJECT,
                 "b/pyproject.toml": PYPROJECT.replace("1.4.2", "2.0.0"),
                 "c/compose.yaml": COMPOSE})
    monkeypatch.setattr(harvester, "MAX_BYTES_READ", len(PYPROJECT) + len(COMPOSE))

    harvest = harvester.harvest_checkout(repo.root)

    assert harvest.files_read == 2
    assert harvest.skipped["too_many_files"] == 1
