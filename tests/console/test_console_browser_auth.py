"""The console in a real browser against an authenticated `vera up`: a curator signs in
with an API key (never kept by the browser), sees only the projects it curates (another
project's queue is refused), verifies a proposal an agent made over MCP with its own token,
and that agent is then served the fact at the chosen tier."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from browser import accessibility_violations, chromium, keep_screenshot
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as ready
from selenium.webdriver.support.ui import Select, WebDriverWait

from vera.config import Settings
from vera.identity.v1 import identity_pb2 as ipb
from vera.identity.v1.identity_pb2_grpc import IdentityServiceStub
from vera.rpc.client import open_channel
from vera.stack.launcher import LaunchedStack, launch, launch_env
from vera.stack.run_files import read_stack_file, stack_client_settings

pytestmark = pytest.mark.e2e

SCOPES = ["memory:read", "memory:propose"]


@pytest.fixture(scope="module")
def authenticated_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LaunchedStack]:
    data_dir = tmp_path_factory.mktemp("console-auth-stack") / "data"
    env = launch_env(data_dir, VERA_MCP__JWT_SECRET="console-e2e-signing-secret-0123456789abcdef",
                     VERA_MCP__AUTH_ISSUER="https://auth.vera.console",
                     VERA_MCP__AUTH_AUDIENCE="https://mcp.vera.console")
    with launch(data_dir, env) as running:
        yield running


@dataclass
class Team:
    curator_key: str
    developer_key: str
    project_a: str
    project_b: str


async def _team(stack: LaunchedStack) -> Team:
    """An administrator's setup over identity: two workspaces with a project each; the
    curator curates A only, the developer is a member of A."""
    settings = stack_client_settings(Settings(), stack.data_dir)
    channel = open_channel(settings.services.identity, 30.0, auth_key=settings.rpc.auth_key)
    try:
        identity = IdentityServiceStub(channel)

        async def user(name: str) -> tuple[str, str]:
            principal = (await identity.CreateUser(
                ipb.CreateUserRequest(display_name=name))).principal
            key = await identity.CreateApiKey(ipb.CreateApiKeyRequest(
                principal_id=principal.principal_id, label="console-e2e"))
            return principal.principal_id, key.api_key

        owner, _ = await user("owner")
        curator, curator_key = await user("curator")
        developer, developer_key = await user("developer")
        projects = []
        for slug in ("alpha", "beta"):
            project = (await identity.EnsureProject(ipb.EnsureProjectRequest(
                principal_id=owner, slug=slug))).project
            workspace = (await identity.CreateWorkspace(ipb.CreateWorkspaceRequest(
                actor_principal_id=owner, slug=f"ws-{slug}"))).workspace
            await identity.AttachProject(ipb.AttachProjectRequest(
                actor_principal_id=owner, workspace_id=workspace.workspace_id,
                project=project.project_id))
            projects.append((project, workspace))
        members = ((curator, ipb.WORKSPACE_ROLE_CURATOR), (developer, ipb.WORKSPACE_ROLE_MEMBER))
        for principal, role in members:
            invited = await identity.SetWorkspaceMember(ipb.SetWorkspaceMemberRequest(
                actor_principal_id=owner, workspace_id=projects[0][1].workspace_id,
                principal_id=principal, role=role))
            await identity.AcceptInvitation(ipb.AcceptInvitationRequest(
                actor_principal_id=principal, invitation_id=invited.invitation.invitation_id))
        return Team(curator_key, developer_key, projects[0][0].project_id,
                    projects[1][0].project_id)
    finally:
        await channel.close()


def _agent(stack: LaunchedStack, api_url: str, api_key: str) -> Client:
    token = httpx.post(f"{api_url}/identity/mcp-token", json={"scopes": SCOPES},
                       headers={"authorization": f"Bearer {api_key}"}).json()["access_token"]
    http = create_mcp_http_client(headers={"authorization": f"Bearer {token}"})
    return Client(streamable_http_client(stack.mcp_url, http_client=http))


@pytest.fixture
def driver() -> Iterator[WebDriver]:
    browser = chromium()
    try:
        yield browser
    finally:
        browser.quit()


async def test_curator_signs_in_with_a_key_and_curates_only_its_project(
    authenticated_stack: LaunchedStack, driver: WebDriver
) -> None:
    team = await _team(authenticated_stack)
    info = read_stack_file(authenticated_stack.data_dir)
    assert info is not None
    api_url = info["api_url"]
    assert info["console_url"] == f"{api_url}/console/"  # no token outside local mode
    async with _agent(authenticated_stack, api_url, team.developer_key) as agent:
        proposed = await agent.call_tool("knowledge_propose", {
            "subject": "ledger-api", "predicate": "owned_by", "object": "the ledger team",
            "task_ref": "task-auth-console", "project": "alpha"})
    assert not proposed.is_error, proposed.content
    fact_key = proposed.structured_content["fact"]["fact_key"]

    wait = WebDriverWait(driver, 30)
    driver.get(info["console_url"])
    wait.until(ready.url_contains("/console/sign-in"))
    key_field = driver.find_element(By.ID, "api_key")
    assert key_field.accessible_name == "API key"
    assert accessibility_violations(driver) == []
    key_field.send_keys(team.curator_key)
    driver.find_element(By.XPATH, "//button[normalize-space()='Sign in']").click()
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "[data-project=alpha]")))
    assert not driver.find_elements(By.CSS_SELECTOR, "[data-project=beta]")
    keep_screenshot(driver, "projects-authenticated")
    stored = driver.execute_script(
        "return JSON.stringify(localStorage) + JSON.stringify(sessionStorage) + document.cookie")
    assert team.curator_key not in stored

    # Project B's queue is refused, and shows nothing of it.
    driver.get(f"{api_url}/console/projects/{team.project_b}/")
    refused = driver.find_element(By.CSS_SELECTOR, "[data-code]").get_attribute("data-code")
    assert refused in ("project_out_of_scope", "unauthorized")

    driver.get(f"{api_url}/console/projects/{team.project_a}/")
    article = wait.until(ready.presence_of_element_located(
        (By.CSS_SELECTOR, f"article.proposal[data-fact-key='{fact_key}']")))
    Select(article.find_element(By.CSS_SELECTOR, "select[name=trust_tier]")).select_by_value("0")
    article.find_element(By.XPATH, ".//button[normalize-space()='Verify']").click()
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "[data-outcome=verified]")))

    driver.get(f"{api_url}/console/projects/{team.project_a}/preview?task=who+owns+ledger-api")
    served = wait.until(ready.presence_of_element_located(
        (By.CSS_SELECTOR, "[data-served=context]")))
    assert "the ledger team" in served.text

    async with _agent(authenticated_stack, api_url, team.developer_key) as agent:
        found = await agent.call_tool("knowledge_search", {
            "query": "who owns ledger-api", "project": "alpha", "max_trust_tier": 0})
    assert not found.is_error, found.content
    assert [r["object"] for r in found.structured_content["results"]
            if r["predicate"] == "owned_by"] == ["the ledger team"]


async def _four_eyes_team(stack: LaunchedStack) -> tuple[str, str, str]:
    """A project "gamma" its owner created in a workspace where another user curates:
    (owner's key, curator's key, project id)."""
    settings = stack_client_settings(Settings(), stack.data_dir)
    channel = open_channel(settings.services.identity, 30.0, auth_key=settings.rpc.auth_key)
    try:
        identity = IdentityServiceStub(channel)
        keys = []
        for name in ("gamma-owner", "gamma-curator"):
            principal = (await identity.CreateUser(
                ipb.CreateUserRequest(display_name=name))).principal
            keys.append((principal.principal_id, (await identity.CreateApiKey(
                ipb.CreateApiKeyRequest(principal_id=principal.principal_id,
                                        label="console-e2e"))).api_key))
        (owner, owner_key), (curator, curator_key) = keys
        project = (await identity.EnsureProject(ipb.EnsureProjectRequest(
            principal_id=owner, slug="gamma"))).project
        workspace = (await identity.CreateWorkspace(ipb.CreateWorkspaceRequest(
            actor_principal_id=owner, slug="ws-gamma"))).workspace
        await identity.AttachProject(ipb.AttachProjectRequest(
            actor_principal_id=owner, workspace_id=workspace.workspace_id,
            project=project.project_id))
        invited = await identity.SetWorkspaceMember(ipb.SetWorkspaceMemberRequest(
            actor_principal_id=owner, workspace_id=workspace.workspace_id,
            principal_id=curator, role=ipb.WORKSPACE_ROLE_CURATOR))
        await identity.AcceptInvitation(ipb.AcceptInvitationRequest(
            actor_principal_id=curator, invitation_id=invited.invitation.invitation_id))
        return owner_key, curator_key, project.project_id
    finally:
        await channel.close()


def _sign_in(driver: WebDriver, wait: WebDriverWait, console_url: str, api_key: str) -> None:
    driver.delete_all_cookies()
    driver.get(console_url)
    wait.until(ready.url_contains("/console/sign-in"))
    driver.find_element(By.ID, "api_key").send_keys(api_key)
    driver.find_element(By.XPATH, "//button[normalize-space()='Sign in']").click()
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "[data-project]")))


async def test_the_owner_switches_on_two_person_verification_and_the_proposer_cannot_verify(
    authenticated_stack: LaunchedStack, driver: WebDriver
) -> None:
    """issue 39 item 16 in Chromium: the owner turns two-person verification on in the
    console; the curator whose agent proposed a fact over MCP is then refused its verify,
    with the code and reason on the page, and the proposal stays pending."""
    owner_key, curator_key, project_id = await _four_eyes_team(authenticated_stack)
    info = read_stack_file(authenticated_stack.data_dir)
    assert info is not None
    api_url = info["api_url"]
    async with _agent(authenticated_stack, api_url, curator_key) as agent:
        proposed = await agent.call_tool("knowledge_propose", {
            "subject": "gamma-api", "predicate": "owned_by", "object": "the gamma team",
            "task_ref": "task-four-eyes", "project": "gamma"})
    assert not proposed.is_error, proposed.content
    fact_key = proposed.structured_content["fact"]["fact_key"]
    project_page = f"{api_url}/console/projects/{project_id}/"
    wait = WebDriverWait(driver, 30)

    _sign_in(driver, wait, info["console_url"], owner_key)
    driver.get(project_page)
    setting = wait.until(ready.presence_of_element_located(
        (By.CSS_SELECTOR, "[data-setting=two_person_verification]")))
    assert setting.get_attribute("data-value") == "off"
    driver.find_element(By.CSS_SELECTOR, "[data-action=two-person-verification]").click()
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "[data-outcome=settings]")))
    assert driver.find_element(By.CSS_SELECTOR, "[data-setting=two_person_verification]"
                               ).get_attribute("data-value") == "on"
    assert accessibility_violations(driver) == []

    _sign_in(driver, wait, info["console_url"], curator_key)
    driver.get(project_page)
    assert not driver.find_elements(By.CSS_SELECTOR, "[data-action=two-person-verification]")
    article = wait.until(ready.presence_of_element_located(
        (By.CSS_SELECTOR, f"article.proposal[data-fact-key='{fact_key}']")))
    article.find_element(By.XPATH, ".//button[normalize-space()='Verify']").click()
    refused = wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "[data-code]")))
    assert (refused.get_attribute("data-code"), refused.get_attribute("data-reason")) == (
        "unauthorized", "two_person_verification")
    keep_screenshot(driver, "four-eyes-refused")
    async with httpx.AsyncClient(timeout=30) as http:
        listed = await http.get(f"{api_url}/curation/projects/gamma/proposals",
                                headers={"authorization": f"Bearer {owner_key}"})
    assert [p["fact_key"] for p in listed.json()["proposals"]] == [fact_key]
