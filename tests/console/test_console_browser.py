"""The console in a real browser against `vera up` (local mode): the printed console_url
signs in, a curator verifies one proposal and rejects one with a reason (the second from
the keyboard), retracts a source after its preview, a cross-site page cannot drive a
decision, a copied cookie is refused after sign-out, every page passes axe, and an agent
over MCP is then served the verified fact at its new tier and neither the rejected one nor
the retracted source's."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from browser import accessibility_violations, chromium, keep_screenshot
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as ready
from selenium.webdriver.support.ui import Select, WebDriverWait

from vera.api.console.sessions import COOKIE
from vera.services.identity.domain import LOCAL_DISPLAY_NAME
from vera.stack.launcher import LaunchedStack, launch
from vera.stack.run_files import read_stack_file

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def local_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LaunchedStack]:
    data_dir = tmp_path_factory.mktemp("console-stack") / "data"
    with launch(data_dir) as running:
        yield running


@pytest.fixture
def driver() -> Iterator[WebDriver]:
    browser = chromium()
    try:
        yield browser
    finally:
        browser.quit()


def _cross_site_page(target: str, csrf_guess: str) -> tuple[ThreadingHTTPServer, str]:
    """Another origin whose page posts a verify form to the console as soon as it loads."""
    page = (f'<!doctype html><title>win a prize</title><form id="f" method="post" '
            f'action="{target}"><input name="csrf_token" value="{csrf_guess}">'
            '<input name="trust_tier" value="0"><input name="authority" value="1"></form>'
            '<script>document.getElementById("f").submit()</script>').encode()

    class Attacker(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Attacker)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def _checked(driver: WebDriver, name: str) -> None:
    assert accessibility_violations(driver) == [], name
    keep_screenshot(driver, name)


def _pending(stack: LaunchedStack) -> list[str]:
    listed = stack.vera("curate", "--data-dir", str(stack.data_dir), "--json", "list", "billing")
    assert listed.returncode == 0, listed.stderr
    return [p["fact_key"] for p in json.loads(listed.stdout)["proposals"]]


async def _propose(stack: LaunchedStack, obj: str) -> str:
    async with stack.mcp_client() as client:
        result = await client.call_tool("knowledge_propose", {
            "subject": "billing-api", "predicate": "owned_by", "object": obj,
            "task_ref": "task-console", "project": "billing", "runtime": "codex",
            "repository_ref": "git@github.com:acme/billing.git", "branch": "fix/owners",
            "code_path": "services/billing/owners.py"})
    assert not result.is_error, result.content
    return result.structured_content["fact"]["fact_key"]


async def test_curator_works_the_queue_in_a_browser(
    local_stack: LaunchedStack, driver: WebDriver, tmp_path: Path
) -> None:
    seed = tmp_path / "billing.jsonl"
    seed.write_text("\n".join(json.dumps(record) for record in (
        {"type": "source", "id": "adr-9", "title": "ADR 9: invoices",
         "observed_at": "2026-11-01T00:00:00Z"},
        {"type": "fact", "subject": "billing-api", "predicate": "depends_on",
         "object": "the payments ledger"},
        {"type": "fact", "subject": "billing-api", "predicate": "stores_invoices_in",
         "object": "the legacy archive", "source": "adr-9"})) + "\n")
    assert local_stack.vera("ingest", str(seed), "--project", "billing", "--data-dir",
                            str(local_stack.data_dir)).returncode == 0
    verified_key = await _propose(local_stack, "the billing squad")
    rejected_key = await _propose(local_stack, "the intern who left")
    untouched_key = await _propose(local_stack, "the finance guild")
    info = read_stack_file(local_stack.data_dir)
    assert info is not None
    console_url = info["console_url"]
    token = console_url.split("token=")[1]
    assert token not in local_stack.log_tail(200_000).replace(console_url, "")

    wait = WebDriverWait(driver, 30)
    driver.get(console_url)
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "[data-project=billing]")))
    _checked(driver, "projects")
    driver.find_element(By.CSS_SELECTOR, "[data-project=billing] a").click()
    article = f"article.proposal[data-fact-key='{verified_key}']"
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, article)))
    _checked(driver, "queue")
    # The proposer's task context, as the agent sent it (the repository canonical).
    shown = {cell.get_attribute("data-context"): cell.text for cell in driver.find_elements(
        By.CSS_SELECTOR, f"{article} [data-context]")}
    assert shown == {"runtime": "codex", "repository": "github.com/acme/billing",
                     "branch": "fix/owners", "path": "services/billing/owners.py"}

    # Verify at tier 0 with the mouse.
    proposal = driver.find_element(By.CSS_SELECTOR, article)
    Select(proposal.find_element(By.CSS_SELECTOR, "select[name=trust_tier]")).select_by_value("0")
    proposal.find_element(By.XPATH, ".//button[normalize-space()='Verify']").click()
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "[data-outcome=verified]")))

    # Reject from the keyboard: with nothing selected, r acts on the first proposal
    # (issue 41), moving to its Reason.
    assert driver.find_elements(By.CSS_SELECTOR, "article.proposal")[0].get_attribute(
        "data-fact-key") == rejected_key
    body = driver.find_element(By.TAG_NAME, "body")
    body.send_keys("r")
    reason = driver.switch_to.active_element
    assert reason.get_attribute("name") == "reason"
    assert reason.accessible_name == "Reason"
    reason.send_keys("the intern left last year", Keys.ENTER)
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "[data-outcome=rejected]")))
    assert _pending(local_stack) == [untouched_key]

    # What an agent would now be served for a task, through the MCP server.
    driver.find_element(By.LINK_TEXT, "Agent preview").click()
    task = wait.until(ready.presence_of_element_located((By.ID, "task")))
    assert task.accessible_name == "Task"
    task.send_keys("who owns billing-api", Keys.ENTER)
    served = wait.until(ready.presence_of_element_located(
        (By.CSS_SELECTOR, "[data-served=context]")))
    assert "the billing squad" in served.text and "the intern who left" not in served.text
    _checked(driver, "agent-preview")

    # Retract a source after its preview.
    driver.find_element(By.LINK_TEXT, "Sources").click()
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "tr[data-source-id=adr-9]")))
    _checked(driver, "sources")
    driver.find_element(By.CSS_SELECTOR, "tr[data-source-id=adr-9] a").click()
    preview = wait.until(ready.presence_of_element_located(
        (By.CSS_SELECTOR, "[data-preview=retracted]")))
    assert "the legacy archive" in preview.text
    _checked(driver, "retract-preview")
    reason = driver.find_element(By.XPATH, "//input[@name='reason']")
    assert reason.accessible_name == "Reason"
    reason.send_keys("ADR 9 was withdrawn")
    driver.find_element(By.XPATH, "//button[normalize-space()='Retract']").click()
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "[data-outcome=retracted]")))

    driver.find_element(By.LINK_TEXT, "Changes").click()
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "tr[data-change]")))
    _checked(driver, "changes")
    # Who changed what: the curator's verify, retraction and the ingest, each by name.
    actors = {(row.get_attribute("data-change"),
               row.find_element(By.CSS_SELECTOR, "[data-actor]").text)
              for row in driver.find_elements(By.CSS_SELECTOR, "tr[data-change]")}
    assert {("published", LOCAL_DISPLAY_NAME), ("retracted", LOCAL_DISPLAY_NAME)} <= actors

    # A cross-site page, opened in the signed-in browser, cannot decide anything.
    queue_url = driver.current_url
    attacker, attacker_url = _cross_site_page(
        f"{info['api_url']}/console/projects/billing/proposals/{untouched_key}/verify", "guess")
    try:
        driver.get(attacker_url)
        wait.until(lambda d: d.current_url != attacker_url)
    finally:
        attacker.shutdown()
    assert _pending(local_stack) == [untouched_key]

    # Sign out; the session's cookie, put back, is refused.
    driver.get(queue_url)
    copied = driver.get_cookie(COOKIE)
    assert copied is not None and copied["httpOnly"] and copied["sameSite"] == "Strict"
    driver.find_element(By.XPATH, "//button[normalize-space()='Sign out']").click()
    wait.until(ready.url_contains("/console/sign-in"))
    _checked(driver, "sign-in")
    driver.add_cookie({k: copied[k] for k in ("name", "value", "path", "httpOnly", "sameSite")})
    driver.get(queue_url)
    assert driver.current_url.endswith("/console/sign-in")
    # The one-time address does not sign in a second time.
    driver.get(console_url)
    assert driver.find_elements(By.CSS_SELECTOR, "[data-outcome=sign-in-refused]")

    async with local_stack.mcp_client() as client:
        found = await client.call_tool("knowledge_search", {
            "query": "who owns billing-api", "project": "billing", "max_trust_tier": 0})
    assert not found.is_error, found.content
    owners = [r["object"] for r in found.structured_content["results"]
              if r["predicate"] == "owned_by"]
    assert owners == ["the billing squad"]
    async with local_stack.mcp_client() as client:
        invoices = await client.call_tool("knowledge_search", {
            "query": "where does billing-api store invoices", "project": "billing"})
    assert not invoices.is_error, invoices.content
    assert "the legacy archive" not in [r["object"] for r in invoices.structured_content[
        "results"] if r["state"] == "active"]
