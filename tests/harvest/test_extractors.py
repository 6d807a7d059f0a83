"""Every extractor over a fixture repository built in the test: exactly the facts its
files state, each citing the exact lines that state it."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from git_fixtures import IDENTITY, FixtureRepo
from harvest_files import FILES

from vera.harvest import extractors
from vera.harvest.git import GitError
from vera.harvest.harvester import MAX_FILE_BYTES, harvest_checkout, within_ontology
from vera.services.knowledge.domain import load_ontology
from vera.services.knowledge.policy import policy_for

# (path, locator, subject, predicate, object); {R} is the repository's identity.
EXPECTED = {
    ('.github/CODEOWNERS', 'L2', '{R}:*', 'owned_by', '@acme/core'),
    ('.github/CODEOWNERS', 'L3', '{R}:/services/payments/', 'owned_by', '@acme/payments @alice'),
    ('.github/workflows/ci.yml', 'L9-L11',
     '{R}/.github/workflows/ci.yml#test', 'ci_runs', 'pip install -e .[dev]\npytest -q'),
    ('.gitlab-ci.yml', 'L5', '{R}/.gitlab-ci.yml#lint', 'uses_image', 'python:3.11'),
    ('.gitlab-ci.yml', 'L7', '{R}/.gitlab-ci.yml#lint', 'ci_runs', 'ruff check .'),
    ('.nvmrc', 'L1', '{R}', 'uses_runtime', 'Node.js 20'),
    ('.python-version', 'L1', '{R}', 'uses_runtime', 'Python 3.11.9'),
    ('.tool-versions', 'L1', '{R}', 'uses_runtime', 'nodejs 20.11.1'),
    ('.tool-versions', 'L2', '{R}', 'uses_runtime', 'golang 1.22.3'),
    ('LICENSE', 'L2-L3', '{R}', 'license', 'Apache-2.0'),
    ('Makefile', 'L4-L5', '{R}/Makefile', 'defines_target', 'test'),
    ('Makefile', 'L7-L8', '{R}/Makefile', 'defines_target', 'build'),
    ('api/openapi.yaml', 'L6-L7', 'Payments API', 'endpoint', 'GET /payments/{id}'),
    ('api/openapi.yaml', 'L6-L9', 'Payments API', 'endpoint', 'DELETE /payments/{id}'),
    ('charts/shop/Chart.yaml', 'L3', 'shop', 'version', '0.5.0'),
    ('charts/shop/Chart.yaml', 'L5-L7', 'shop', 'depends_on', 'redis 18.6.1'),
    ('charts/shop/values.yaml', 'L1-L4',
     '{R}/charts/shop/values.yaml#image', 'uses_image', 'ghcr.io/acme/shop:2.0.0'),
    ('charts/shop/values.yaml', 'L7',
     '{R}/charts/shop/values.yaml#service', 'exposes_port', '8080'),
    ('compose.yaml', 'L11', '{R}/compose.yaml#db', 'uses_image', 'postgres:16'),
    ('compose.yaml', 'L13-L14', '{R}/compose.yaml#db', 'exposes_port', '5433:5432'),
    ('compose.yaml', 'L5', '{R}/compose.yaml#api', 'exposes_port', '8080:8080'),
    ('compose.yaml', 'L7', '{R}/compose.yaml#api', 'depends_on', '{R}/compose.yaml#db'),
    ('deploy/payments.yaml', 'L10',
     '{R}/deploy/payments.yaml#Deployment/payments', 'uses_image', 'ghcr.io/acme/payments:1.4.2'),
    ('deploy/payments.yaml', 'L12',
     '{R}/deploy/payments.yaml#Deployment/payments', 'exposes_port', '8000'),
    ('deploy/payments.yaml', 'L20',
     '{R}/deploy/payments.yaml#Service/payments', 'exposes_port', '80'),
    ('docs/adr/0001-use-postgresql.md', 'L1',
     '1. Use PostgreSQL', 'documented_in', '{R}/docs/adr/0001-use-postgresql.md'),
    ('docs/adr/0001-use-postgresql.md', 'L11',
     '1. Use PostgreSQL', 'decided', 'We will store orders in PostgreSQL.'),
    ('docs/adr/0001-use-postgresql.md', 'L7', '1. Use PostgreSQL', 'status', 'Superseded'),
    ('docs/adr/0001-use-postgresql.md', 'L7',
     '1. Use PostgreSQL', 'superseded_by', '{R}/docs/adr/0002-use-cockroachdb.md'),
    ('docs/adr/0002-use-cockroachdb.md', 'L2', 'Use CockroachDB for orders', 'status', 'Accepted'),
    ('docs/adr/0002-use-cockroachdb.md', 'L5',
     'Use CockroachDB for orders', 'documented_in', '{R}/docs/adr/0002-use-cockroachdb.md'),
    ('docs/adr/0002-use-cockroachdb.md', 'L9',
     'Use CockroachDB for orders', 'decided', 'CockroachDB'),
    ('orders/pom.xml', 'L3-L7', 'orders-service', 'depends_on',
     'org.springframework.boot:spring-boot-starter-parent 3.2.5'),
    ('orders/pom.xml', 'L3-L7', 'orders-service', 'built_with',
     'org.springframework.boot:spring-boot-starter-parent'),
    ('orders/pom.xml', 'L9', 'orders-service', 'version', '2.1.0'),
    ('orders/pom.xml', 'L10', 'orders-service', 'license', 'Apache-2.0'),
    ('orders/pom.xml', 'L12', 'orders-service', 'uses_runtime', 'Java 21'),
    ('orders/pom.xml', 'L15-L18', 'orders-service', 'depends_on', 'org.postgresql:postgresql'),
    ('orders/pom.xml', 'L15-L18', 'orders-service', 'uses_database_driver',
     'org.postgresql:postgresql'),
    ('orders/pom.xml', 'L19-L24', 'orders-service', 'depends_on',
     'org.junit.jupiter:junit-jupiter ${junit.version}'),
    ('orders/pom.xml', 'L19-L24', 'orders-service', 'uses_test_runner',
     'org.junit.jupiter:junit-jupiter'),
    ('engine/Cargo.toml', 'L10', 'shop-engine', 'depends_on', 'sqlx 0.7'),
    ('engine/Cargo.toml', 'L10', 'shop-engine', 'uses_database_driver', 'sqlx'),
    ('engine/Cargo.toml', 'L12-L14', 'shop-engine', 'depends_on', 'serde 1.0'),
    ('engine/Cargo.toml', 'L17', 'shop-engine', 'depends_on', 'rstest 0.18'),
    ('engine/Cargo.toml', 'L17', 'shop-engine', 'uses_test_runner', 'rstest'),
    ('engine/Cargo.toml', 'L3', 'shop-engine', 'version', '0.3.0'),
    ('engine/Cargo.toml', 'L5', 'shop-engine', 'uses_runtime', 'Rust 1.74'),
    ('engine/Cargo.toml', 'L6', 'shop-engine', 'license', 'MIT OR Apache-2.0'),
    ('engine/Cargo.toml', 'L9', 'shop-engine', 'built_with', 'axum'),
    ('engine/Cargo.toml', 'L9', 'shop-engine', 'depends_on', 'axum 0.7'),
    ('gateway/go.mod', 'L13', '{R}/gateway', 'depends_on', 'github.com/stretchr/testify v1.8.4'),
    ('gateway/go.mod', 'L13', '{R}/gateway', 'uses_test_runner', 'github.com/stretchr/testify'),
    ('gateway/go.mod', 'L3', '{R}/gateway', 'uses_runtime', 'Go 1.22'),
    ('gateway/go.mod', 'L5', '{R}/gateway', 'uses_runtime', 'Go toolchain go1.22.3'),
    ('gateway/go.mod', 'L8', '{R}/gateway', 'built_with', 'github.com/gin-gonic/gin'),
    ('gateway/go.mod', 'L8', '{R}/gateway', 'depends_on', 'github.com/gin-gonic/gin v1.9.1'),
    ('gateway/go.mod', 'L9', '{R}/gateway', 'depends_on', 'github.com/jackc/pgx/v5 v5.5.0'),
    ('gateway/go.mod', 'L9', '{R}/gateway', 'uses_database_driver', 'github.com/jackc/pgx/v5'),
    ('infra/main.tf', 'L1', '{R}/infra', 'provisions', 'aws_db_instance.payments'),
    ('infra/main.tf', 'L10', '{R}/infra', 'uses_module', 'terraform-aws-modules/vpc/aws'),
    ('infra/main.tf', 'L5', '{R}/infra', 'provisions', 'aws_sqs_queue.orders'),
    ('justfile', 'L3-L4', '{R}/justfile', 'defines_target', 'lint'),
    ('noxfile.py', 'L3-L4', '{R}/noxfile.py', 'defines_session', 'nox -s tests'),
    ('noxfile.py', 'L7-L8', '{R}/noxfile.py', 'defines_session', 'nox -s type-check'),
    ('pyproject.toml', 'L10', 'payments-api', 'built_with', 'fastapi'),
    ('pyproject.toml', 'L10', 'payments-api', 'depends_on', 'fastapi>=0.110'),
    ('pyproject.toml', 'L11', 'payments-api', 'depends_on', 'asyncpg==0.29.0'),
    ('pyproject.toml', 'L11', 'payments-api', 'uses_database_driver', 'asyncpg'),
    ('pyproject.toml', 'L15', 'payments-api', 'depends_on', 'pytest>=8'),
    ('pyproject.toml', 'L15', 'payments-api', 'uses_test_runner', 'pytest'),
    ('pyproject.toml', 'L6', 'payments-api', 'version', '1.4.2'),
    ('pyproject.toml', 'L7', 'payments-api', 'license', 'Apache-2.0'),
    ('pyproject.toml', 'L8', 'payments-api', 'uses_runtime', 'Python >=3.11'),
    ('rust-toolchain.toml', 'L2', '{R}', 'uses_runtime', 'Rust 1.78.0'),
    ('services/payments/Dockerfile', 'L1',
     '{R}/services/payments/Dockerfile', 'base_image', 'python:3.11-slim'),
    ('services/payments/Dockerfile', 'L4',
     '{R}/services/payments/Dockerfile', 'base_image', 'gcr.io/distroless/python3'),
    ('services/payments/Dockerfile', 'L5',
     '{R}/services/payments/Dockerfile', 'exposes_port', '8000'),
    ('services/payments/Dockerfile', 'L5',
     '{R}/services/payments/Dockerfile', 'exposes_port', '9101'),
    ('services/worker/requirements.txt', 'L2',
     '{R}/services/worker', 'depends_on', 'celery==5.3.6'),
    ('services/worker/requirements.txt', 'L3-L4', '{R}/services/worker', 'depends_on', 'redis>=5'),
    ('services/worker/requirements.txt', 'L3-L4',
     '{R}/services/worker', 'uses_database_driver', 'redis'),
    ('tox.ini', 'L4-L5', '{R}/tox.ini', 'defines_session', 'tox -e lint'),
    ('web/package.json', 'L10', 'shop-web', 'defines_script', 'build: next build'),
    ('web/package.json', 'L13', 'shop-web', 'built_with', 'next'),
    ('web/package.json', 'L13', 'shop-web', 'depends_on', 'next 14.1.0'),
    ('web/package.json', 'L14', 'shop-web', 'depends_on', 'pg ^8.11.0'),
    ('web/package.json', 'L14', 'shop-web', 'uses_database_driver', 'pg'),
    ('web/package.json', 'L17', 'shop-web', 'depends_on', 'vitest ^1.2.0'),
    ('web/package.json', 'L17', 'shop-web', 'uses_test_runner', 'vitest'),
    ('web/package.json', 'L3', 'shop-web', 'version', '2.0.0'),
    ('web/package.json', 'L4', 'shop-web', 'license', 'MIT'),
    ('web/package.json', 'L6', 'shop-web', 'uses_runtime', 'node >=18'),
    ('web/package.json', 'L9', 'shop-web', 'defines_script', 'test: vitest run'),
}


def _rows(harvest):
    return {(f.path, f.locator, f.subject.replace(IDENTITY, "{R}"), f.predicate,
             f.object.replace(IDENTITY, "{R}")) for f in harvest.facts}


@pytest.fixture
def shop(tmp_path: Path) -> FixtureRepo:
    repo = FixtureRepo(tmp_path / "shop")
    repo.commit(FILES)
    return repo


def test_every_extractor_states_exactly_what_its_file_says(shop: FixtureRepo) -> None:
    harvest = harvest_checkout(shop.root)
    assert harvest.repository == IDENTITY and harvest.branch == "main"
    assert harvest.commit.committed_at == datetime(2026, 1, 1, 12, tzinfo=UTC)
    assert not harvest.skipped
    assert _rows(harvest) == EXPECTED
    assert harvest.files_read == len(FILES)


def test_each_fact_cites_the_exact_lines_of_its_file(shop: FixtureRepo) -> None:
    for fact in harvest_checkout(shop.root).facts:
        lines = FILES[fact.path].splitlines()
        assert fact.evidence == "\n".join(lines[fact.start - 1:fact.end])
        assert fact.quote and fact.quote in fact.evidence


def test_every_extractor_is_exercised_and_declares_what_it_states(shop: FixtureRepo) -> None:
    by_path: dict[str, set[str]] = {}
    for fact in harvest_checkout(shop.root).facts:
        by_path.setdefault(fact.path, set()).add(fact.predicate)
    for extractor in extractors.EXTRACTORS:
        stated = set().union(*(p for path, p in by_path.items() if extractor.wants(path)))
        assert stated, extractors.name_of(extractor)
        assert stated <= extractor.PREDICATES | _shared(extractor), extractors.name_of(extractor)


def _shared(extractor) -> set[str]:
    # A path some other extractor also reads (a YAML file is a manifest candidate too).
    return set().union(*(e.PREDICATES for e in extractors.EXTRACTORS if e is not extractor))


def test_the_commit_is_read_not_the_work_tree(shop: FixtureRepo) -> None:
    shop.write({"pyproject.toml": FILES["pyproject.toml"].replace("fastapi", "django"),
                "requirements.txt": "flask==3.0\n"})
    objects = {f.object for f in harvest_checkout(shop.root).facts}
    assert "fastapi>=0.110" in objects
    assert not {"django", "flask==3.0"} & objects


def test_symlinks_are_never_followed(shop: FixtureRepo, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("leaked==1.0\n")
    os.symlink(outside, shop.root / "requirements.txt")
    os.symlink(tmp_path, shop.root / "requirements")
    shop.commit({})
    objects = {f.object for f in harvest_checkout(shop.root).facts}
    assert "leaked==1.0" not in objects


def test_a_file_holding_a_credential_yields_no_fact_from_those_lines(tmp_path: Path) -> None:
    repo = FixtureRepo(tmp_path / "r")
    repo.commit({"package.json": '{"name": "x", "scripts": {\n  "deploy": "curl -H '
                 '\'Authorization: Bearer ghp_0123456789abcdefABCDEF0123456789abcd\'",\n'
                 '  "test": "jest"\n}}\n'})
    harvest = harvest_checkout(repo.root)
    assert {f.object for f in harvest.facts} == {"test: jest"}
    assert harvest.skipped["secret"] == 1


def test_oversized_vendored_and_undecodable_files_are_not_read(tmp_path: Path) -> None:
    repo = FixtureRepo(tmp_path / "r")
    repo.commit({"a/requirements.txt": "x==1\n" + "#" * MAX_FILE_BYTES,
                 "node_modules/left-pad/package.json": '{"name": "left-pad"}',
                 "vendor/requirements.txt": "y==1\n"})
    (repo.root / "b").mkdir()
    (repo.root / "b" / "requirements.txt").write_bytes(b"z==1\n\xff\xfe\n")
    repo.commit({})
    harvest = harvest_checkout(repo.root)
    assert harvest.facts == [] and harvest.files_read == 0
    assert harvest.skipped["unreadable"] == 2


def test_a_pom_declaring_entities_is_not_read(tmp_path: Path) -> None:
    """Entity expansion is how XML is made to explode (each entity ten of the one
    before); a POM needs no DTD, so one declaring any is not read, not even a harmless one."""
    repo = FixtureRepo(tmp_path / "r")
    repo.commit({"pom.xml": '<?xml version="1.0"?>\n<!DOCTYPE project [<!ENTITY v "1.0">]>\n'
                            "<project>\n  <artifactId>app</artifactId>\n"
                            "  <version>1.0</version>\n</project>\n"})
    harvest = harvest_checkout(repo.root)
    assert harvest.files_read == 1 and harvest.facts == []


def test_what_the_tests_read_is_not_stated_as_the_repositorys(tmp_path: Path) -> None:
    """A fixture's manifest names another project (`transformers depends_on torch`): it
    is what a test exercises, never a fact about this repository. A workflow named for
    tests is the repository's own."""
    repo = FixtureRepo(tmp_path / "r")
    repo.commit({"pyproject.toml": '[project]\nname = "shop"\ndependencies = ["flask"]\n',
                 "test/ecosystem/transformers/pyproject.toml":
                     '[project]\nname = "transformers"\ndependencies = ["torch"]\n',
                 "pkg/diff/testdata/deploy.yaml": "kind: Pod\nspec:\n  containers:\n"
                                                  "  - image: nginx:1.19\n",
                 "services/api/tests/fixtures/requirements.txt": "django==1.0\n",
                 "src/__tests__/package.json": '{"name": "sample", "version": "9.9.9"}',
                 ".github/workflows/test-integration.yml":
                     "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n"
                     "    steps:\n      - run: make test\n"})
    harvest = harvest_checkout(repo.root)
    assert {f.path for f in harvest.facts} == {"pyproject.toml",
                                               ".github/workflows/test-integration.yml"}


def test_a_repository_without_a_remote_needs_one_named(tmp_path: Path) -> None:
    repo = FixtureRepo(tmp_path / "r", remote=None)
    repo.commit({"requirements.txt": "flask==3.0\n"})
    with pytest.raises(GitError):
        harvest_checkout(repo.root)
    harvest = harvest_checkout(repo.root, repository="gitlab.example.org/team/r")
    assert {f.subject for f in harvest.facts} == {"gitlab.example.org/team/r"}


def test_not_a_checkout_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(GitError):
        harvest_checkout(tmp_path)


def test_parsing_writes_nothing_to_the_working_directory(shop: FixtureRepo, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    assert harvest_checkout(shop.root).facts
    assert list(cwd.iterdir()) == []


def test_the_default_ontology_ships_every_predicate_a_harvest_states() -> None:
    allowed = policy_for(load_ontology()).allowed_predicates
    assert extractors.all_predicates() <= allowed


def test_a_custom_ontology_lacking_predicates_gets_them_named_and_skipped(
        shop: FixtureRepo) -> None:
    facts = harvest_checkout(shop.root).facts
    allowed = extractors.all_predicates() - {"exposes_port", "ci_runs"}
    kept, missing = within_ontology(facts, allowed)
    assert missing == ["ci_runs", "exposes_port"]
    assert {f.predicate for f in kept} == allowed
    assert len(kept) == len([f for f in facts if f.predicate in allowed])
