"""The client installs the way docs/install.md says (issue 41): `scripts/build-client`
builds the wheel, `pip install ./dist/vera_memory-*.whl` installs it into a clean
virtualenv with nothing else, and that install's own `vera connect` and `vera doctor`
work against an authenticated stack (a real runtime CLI, codex, from scripts/runtimes)."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import httpx
import pytest
import test_runtime_handshake as handshake

from vera.integrations.ownership import credential_files

pytestmark = pytest.mark.e2e
runtime_bin, project = handshake.runtime_bin, handshake.project
CHECKOUT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def client_vera(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `vera` of a clean virtualenv that installed only the built wheel (and what it
    declares)."""
    base = tmp_path_factory.mktemp("client-wheel")
    built = subprocess.run([str(CHECKOUT / "scripts" / "build-client"), str(base / "dist")],
                           env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable},
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    (wheel,) = (base / "dist").glob("vera_memory-*.whl")
    assert Path(built.stdout.strip()) == wheel
    env_dir = base / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    subprocess.run([str(env_dir / "bin" / "python"), "-m", "pip", "install", "--quiet",
                    str(wheel)], check=True, timeout=900)
    return env_dir / "bin" / "vera"


def test_the_wheels_vera_connects_and_doctors_an_authenticated_stack(
        client_vera: Path, auth_stack, runtime_bin: Path, tmp_path: Path) -> None:
    repo, env = project(auth_stack, runtime_bin, tmp_path)
    env = {k: v for k, v in env.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    api_url = f"http://127.0.0.1:{auth_stack.env['VERA_API__PORT']}"
    api_key = httpx.post(f"{api_url}/identity/register", json={"display_name": "dev"},
                         timeout=60).json()["api_key"]

    def vera(*args: str, stdin: str | None = None, **more: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(client_vera), *args], cwd=repo, env={**env, **more},
                              input=stdin, capture_output=True, text=True, timeout=180)

    connected = vera("connect", "codex", "--api-url", api_url, "--mcp-url",
                     auth_stack.mcp_url, "--yes", "--api-key-stdin", stdin=api_key + "\n")
    assert connected.returncode == 0, connected.stdout + connected.stderr
    token = (repo / credential_files("codex").token).read_text()
    doctor = vera("doctor", "codex", VERA_MCP_TOKEN=token)
    tools = next(line for line in doctor.stdout.splitlines() if "vera tools visible" in line)
    assert tools.strip().startswith("ok"), doctor.stdout + doctor.stderr
    # Nothing of the checkout's environment served it: the wheel's own package did.
    where = subprocess.run([str(client_vera.parent / "python"), "-c",
                            "import vera; print(vera.__file__)"],
                           capture_output=True, text=True, timeout=60, env=env)
    assert str(client_vera.parent.parent) in where.stdout, where
