"""Bulk review in a real browser against `vera up` (local mode): `vera harvest` files a
small repository's facts as proposals, the curator verifies one file's group with the
mouse and rejects another's from the keyboard with the reason typed once, every page
passes axe, and the knowledge service then holds the one file's facts and none pending."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from browser import accessibility_violations, chromium, keep_screenshot
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as ready
from selenium.webdriver.support.ui import Select, WebDriverWait

from vera.local_secret import read_secret
from vera.stack.launcher import LaunchedStack, launch
from vera.stack.run_files import read_stack_file

pytestmark = pytest.mark.e2e

REPOSITORY = "github.com/acme/shop"
PYPROJECT = """[project]
name = "shop-api"
requires-python = ">=3.12"
dependencies = [
  "fastapi==0.115.0",
  "asyncpg==0.29.0",
]
"""
COMPOSE = """services:
  db:
    image: postgres:16
"""


@pytest.fixture(scope="module")
def local_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LaunchedStack]:
    data_dir = tmp_path_factory.mktemp("bulk-stack") / "data"
    with launch(data_dir) as running:
        yield running


@pytest.fixture
def driver() -> Iterator[WebDriver]:
    browser = chromium()
    try:
        yield browser
    finally:
        browser.quit()


def _repository(root: Path) -> Path:
    root.mkdir()
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "compose.yaml").write_text(COMPOSE)
    for command in (["init", "-q", "-b", "main"], ["add", "."],
                    ["-c", "user.name=t", "-c", "user.email=t@example.com",
                     "commit", "-q", "-m", "shop"]):
        subprocess.run(["git", "-C", str(root), *command], check=True, capture_output=True)
    return root


def _pending(stack: LaunchedStack) -> list[dict]:
    listed = stack.vera("curate", "--data-dir", str(stack.data_dir), "--json", "list", "shop")
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout)["proposals"]


def _checked(driver: WebDriver, name: str) -> None:
    assert accessibility_violations(driver) == [], name
    keep_screenshot(driver, name)


def test_curator_reviews_a_harvest_a_file_at_a_time(
    local_stack: LaunchedStack, driver: WebDriver, tmp_path: Path
) -> None:
    data_dir = str(local_stack.data_dir)
    seed = tmp_path / "shop.jsonl"
    seed.write_text(json.dumps({"type": "fact", "subject": "shop-api",
                                "predicate": "owned_by", "object": "the shop team"}) + "\n")
    assert local_stack.vera("ingest", str(seed), "--project", "shop",
                            "--data-dir", data_dir).returncode == 0
    harvested = local_stack.vera("harvest", str(_repository(tmp_path / "shop")), "--project",
                                 "shop", "--repository", REPOSITORY, "--data-dir", data_dir)
    assert harvested.returncode == 0, harvested.stderr
    by_file: dict[str, set[str]] = {}
    for proposal in _pending(local_stack):
        by_file.setdefault(proposal["source_id"], set()).add(proposal["fact_key"])
    pyproject, compose = f"{REPOSITORY}/pyproject.toml", f"{REPOSITORY}/compose.yaml"
    assert set(by_file) == {pyproject, compose}
    assert len(by_file[pyproject]) >= 2

    info = read_stack_file(local_stack.data_dir)
    assert info is not None
    wait = WebDriverWait(driver, 30)
    driver.get(info["console_url"])
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "[data-project=shop]")))
    driver.find_element(By.CSS_SELECTOR, "[data-project=shop] a").click()
    driver.find_element(By.LINK_TEXT, "Bulk review").click()
    group = f"article.group.file[data-source-id='{pyproject}']"
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, group)))
    _checked(driver, "bulk-review")
    # Each proposal with its evidence lines, exactly as the file has them.
    evidence = [e.text for e in driver.find_elements(By.CSS_SELECTOR, f"{group} pre.evidence")]
    assert '  "asyncpg==0.29.0",' in evidence and '  "fastapi==0.115.0",' in evidence

    # Verify the pyproject's group with the mouse, at tier 0.
    files = driver.find_element(By.CSS_SELECTOR, group)
    Select(files.find_element(By.CSS_SELECTOR, ":scope > .decide select[name=trust_tier]")
           ).select_by_value("0")
    files.find_element(By.CSS_SELECTOR, ":scope > .decide [data-action=verify-group]").click()
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "[data-outcome=verified]")))
    assert {p["source_id"] for p in _pending(local_stack)} == {compose}

    # Reject the compose file's group from the keyboard: j selects the harvest, j again its
    # (now only) file, r moves to the group's Reason, typed once, Enter rejects them all.
    driver.find_element(By.TAG_NAME, "body").send_keys("j")
    driver.switch_to.active_element.send_keys("j")
    current = driver.find_element(By.CSS_SELECTOR, "article.group.current")
    assert current.get_attribute("data-source-id") == compose
    driver.switch_to.active_element.send_keys("r")
    reason = driver.switch_to.active_element
    assert reason.get_attribute("name") == "reason" and reason.accessible_name == "Reason"
    reason.send_keys("the compose file is for development only", Keys.ENTER)
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "[data-outcome=rejected]")))
    _checked(driver, "bulk-review-done")
    assert _pending(local_stack) == []

    # The knowledge service holds the verified file's facts, at tier 0, citing their
    # lines, and none of the rejected file's.
    changes = httpx.get(f"{info['api_url']}/curation/projects/shop/changes",
                        headers={"authorization": f"Bearer {read_secret(local_stack.data_dir)}"},
                        timeout=30)
    assert changes.status_code == 200, changes.text
    published = [c["fact"] for c in changes.json()["changes"] if c["change"] == "published"]
    harvested = {f["object"]: f for f in published if f["subject"] != "shop-api"
                 or f["predicate"] != "owned_by"}
    assert {"fastapi==0.115.0", "asyncpg==0.29.0"} <= set(harvested)
    assert "postgres:16" not in harvested
    assert {f["trust_tier"] for f in harvested.values()} == {0}
    assert {c["source_id"] for f in harvested.values() for c in f["citations"]} == {pyproject}
