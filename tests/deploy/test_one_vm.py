"""One VM without Kubernetes (issue 41; docs/deploy.md, "One VM"): the shipped systemd
unit verifies with systemd-analyze; the shipped Caddy config validates and, with the
shipped vera.env's settings, serves an authenticated `vera up` over TLS: an agent's
MCP call with the token the banner's snippet names, a person's REST call, and a Host the
allow-list does not name refused with the setting that admits it. Tools: scripts/one-vm-tools.

Only what differs on a test machine changes: where VERA is installed, free ports instead
of 8080, 8081 and 443, and Caddy's own local CA instead of a public one.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vera.stack.launcher import LaunchedStack, launch, launch_env
from vera.stack.ports import free_port
from vera.stack.run_files import read_stack_file

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
ONE_VM = ROOT / "deploy" / "one-vm"
MCP_NAME, API_NAME = "vera.example.org", "vera-api.example.org"


def tool(name: str) -> str:
    found = shutil.which(name)
    assert found, f"{name} is missing: run scripts/one-vm-tools"
    return found


def shipped_env() -> dict[str, str]:
    """vera.env.example as systemd's EnvironmentFile reads it (quotes around a value go)."""
    env = {}
    for line in (ONE_VM / "vera.env.example").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition("=")
            env[key] = shlex.split(value)[0] if value else ""
    return env


def test_the_shipped_unit_verifies(tmp_path: Path) -> None:
    unit = (ONE_VM / "vera.service").read_text()
    assert "/opt/vera/.venv/bin/vera up --data-dir /var/lib/vera" in unit
    # Where VERA is installed here; the rest as shipped.
    here = Path(sys.executable).parent / "vera"
    (tmp_path / "vera.service").write_text(unit.replace("/opt/vera/.venv/bin/vera", str(here)))
    verified = subprocess.run([tool("systemd-analyze"), "verify", "--man=no",
                               str(tmp_path / "vera.service")],
                              capture_output=True, text=True, timeout=120)
    assert verified.returncode == 0, verified.stderr
    assert "vera.service" not in verified.stderr, verified.stderr  # no warning about it


def test_the_shipped_env_is_valid_settings_for_an_authenticated_stack() -> None:
    from vera.config import load_settings

    env = shipped_env()
    os_env = {k: v for k, v in os.environ.items() if not k.startswith("VERA_")}
    saved = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update({**os_env, **env})
        settings = load_settings()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert settings.auth_profile == "remote-authenticated"
    assert (settings.mcp_bind_host, settings.api_bind_host) == ("127.0.0.1", "127.0.0.1")
    assert settings.mcp.allowed_hosts == [MCP_NAME]
    assert settings.api.allowed_hosts == [API_NAME]


def test_the_shipped_caddyfile_validates(tmp_path: Path) -> None:
    validated = subprocess.run(
        [tool("caddy"), "validate", "--adapter", "caddyfile",
         "--config", str(ONE_VM / "Caddyfile")],
        env={**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path),
             "XDG_CONFIG_HOME": str(tmp_path)},
        capture_output=True, text=True, timeout=120)
    assert validated.returncode == 0, validated.stderr[-2000:]


def caddyfile_for_test(https_port: int, mcp_port: int, api_port: int) -> str:
    shipped = (ONE_VM / "Caddyfile").read_text()
    sites = (shipped.replace(f"{MCP_NAME} {{", f"{MCP_NAME}:{https_port} {{")
             .replace(f"{API_NAME} {{", f"{API_NAME}:{https_port} {{")
             .replace("127.0.0.1:8080", f"127.0.0.1:{mcp_port}")
             .replace("127.0.0.1:8081", f"127.0.0.1:{api_port}"))
    assert sites.count(str(https_port)) == 2, "the shipped Caddyfile's sites changed"
    return ("{\n\tadmin off\n\tlocal_certs\n\tskip_install_trust\n"
            f"\thttp_port {free_port()}\n\thttps_port {https_port}\n}}\n\n{sites}")


def curl(https_port: int, name: str, path: str, *args: str) -> tuple[int, str]:
    """curl as a client on another machine does: the name resolves to the VM (here,
    loopback), TLS from the proxy (its local CA, not trusted here: -k)."""
    done = subprocess.run(
        [tool("curl"), "-sk", "--resolve", f"{name}:{https_port}:127.0.0.1",
         "-w", "\n%{http_code}", *args, f"https://{name}:{https_port}{path}"],
        capture_output=True, text=True, timeout=60)
    body, _, status = done.stdout.rpartition("\n")
    return int(status or 0), body


def banner(stack: LaunchedStack) -> str:
    return stack.log_path.read_text(errors="replace").rpartition("VERA is ready.")[2]


def test_an_authenticated_stack_is_served_over_tls_through_the_shipped_proxy(
        tmp_path: Path) -> None:
    https_port, api_port = free_port(), free_port()
    env = shipped_env()
    env.update({
        "VERA_API__PORT": str(api_port),  # the MCP port: `vera up --port`, a free one
        "VERA_MCP__ALLOWED_HOSTS": json.dumps([f"{MCP_NAME}:{https_port}"]),
        "VERA_API__ALLOWED_HOSTS": json.dumps([f"{API_NAME}:{https_port}"]),
        "VERA_API__ALLOWED_ORIGINS": json.dumps([f"https://{API_NAME}:{https_port}"]),
        "VERA_MCP__AUTH_AUDIENCE": f"https://{MCP_NAME}:{https_port}",
    })
    data_dir = tmp_path / "data"
    caddy_home = {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "caddy-data"),
                  "XDG_CONFIG_HOME": str(tmp_path / "caddy-config")}
    with launch(data_dir, launch_env(data_dir, **env)) as stack:
        config = tmp_path / "Caddyfile"
        config.write_text(caddyfile_for_test(https_port, stack.port, api_port))
        with open(tmp_path / "caddy.log", "w") as log:
            proxy = subprocess.Popen([tool("caddy"), "run", "--adapter", "caddyfile",
                                      "--config", str(config)],
                                     env={**os.environ, **caddy_home},
                                     stdout=subprocess.DEVNULL, stderr=log)
        try:
            served_through(proxy, stack, data_dir, https_port, api_port, tmp_path)
        finally:
            proxy.terminate()
            proxy.wait(timeout=30)


def served_through(proxy: subprocess.Popen, stack: LaunchedStack, data_dir: Path,
                   https_port: int, api_port: int, tmp_path: Path) -> None:
    said = banner(stack)
    # The addresses it really listens on, and the settings that admit more names.
    assert f"127.0.0.1:{api_port}" in said and "VERA_MCP__ALLOWED_HOSTS" in said
    snippet = json.loads(said[said.index("{"):said.rindex("}") + 1])["mcpServers"]
    header = snippet["vera"]["headers"]["Authorization"]
    assert header == "Bearer ${VERA_MCP_TOKEN}"

    created = stack.vera("admin", "create-user", "--name", "root", "--admin",
                         "--data-dir", str(data_dir))
    assert created.returncode == 0, created.stderr
    key = re.search(r"api_key:\s+(\S+)", created.stdout).group(1)  # type: ignore[union-attr]

    # A person over TLS, through the proxy, by the API's name (once Caddy listens).
    give_up = time.monotonic() + 60
    while curl(https_port, API_NAME, "/livez")[0] != 200:
        assert proxy.poll() is None, (tmp_path / "caddy.log").read_text()[-2000:]
        assert time.monotonic() < give_up, (tmp_path / "caddy.log").read_text()[-2000:]
        time.sleep(0.5)
    status, body = curl(https_port, API_NAME, "/identity/me",
                        "-H", f"Authorization: Bearer {key}")
    assert status == 200, body
    status, body = curl(https_port, API_NAME, "/identity/mcp-token", "-X", "POST",
                        "-H", f"Authorization: Bearer {key}",
                        "-H", "content-type: application/json",
                        "-d", '{"scopes": ["memory:read"]}')
    assert status == 200, body
    token = json.loads(body)["access_token"]

    # An agent's MCP call with the snippet's header, by the MCP name.
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    status, body = curl(
        https_port, MCP_NAME, "/mcp", "-X", "POST",
        "-H", "Authorization: " + header.replace("${VERA_MCP_TOKEN}", token),
        "-H", "content-type: application/json",
        "-H", "accept: application/json, text/event-stream", "-d", json.dumps(rpc))
    assert status == 200, body
    assert json.loads(body)["result"]["tools"]

    # The stack itself, reached by a name its allow-list does not hold: 421,
    # naming the setting that admits it.
    api = read_stack_file(data_dir)["api_url"]  # type: ignore[index]
    refused = subprocess.run(
        [tool("curl"), "-s", "-H", "Host: vera.internal", f"{api}/identity/me"],
        capture_output=True, text=True, timeout=60)
    error = json.loads(refused.stdout)["error"]
    assert (error["field"], error["setting"]) == ("host", "VERA_API__ALLOWED_HOSTS")

