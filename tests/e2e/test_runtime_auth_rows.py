"""The matrix's auth rows against the real gateway in the remote-authenticated profile:
after `vera connect` stored a working token, `vera doctor` tells an expired token, one for
another audience and one short of the server-wide scope apart, each with its fix, although
the gateway answers every bad token alike."""

from __future__ import annotations

import subprocess
import time

import httpx
import jwt
import pytest
import test_runtime_handshake as handshake
from conftest import AUTH_AUDIENCE, AUTH_ISSUER, AUTH_SECRET

from vera.integrations.ownership import credential_files

pytestmark = pytest.mark.e2e
runtime_bin = handshake.runtime_bin  # the pinned runtime CLIs, installed once
project, run_vera = handshake.project, handshake.run_vera


def tools_line(report: str) -> str:
    return next(line.strip() for line in report.splitlines() if "vera tools visible" in line)


def test_doctor_names_expired_wrong_audience_and_insufficient_scope(auth_stack, runtime_bin,
                                                                    tmp_path) -> None:
    repo, env = project(auth_stack, runtime_bin, tmp_path)
    api_url = f"http://127.0.0.1:{auth_stack.env['VERA_API__PORT']}"
    api_key = httpx.post(f"{api_url}/identity/register",
                         json={"display_name": "dev"}).json()["api_key"]
    done = run_vera(repo, env, "connect", "codex", "--api-url", api_url, "--mcp-url",
                    auth_stack.mcp_url, "--yes", "--api-key-stdin", stdin=api_key + "\n")
    assert done.returncode == 0, done.stdout + done.stderr
    stored = (repo / credential_files("codex").token).read_text()
    minted = jwt.decode(stored, options={"verify_signature": False})

    def token(**claims: object) -> str:
        # As the API mints them (an expiry, the key it came from), each case changing one claim.
        return jwt.encode({"iss": AUTH_ISSUER, "sub": minted["sub"], "aud": AUTH_AUDIENCE,
                           "scope": "memory:read", "exp": minted["exp"],
                           "vera_key_id": minted["vera_key_id"], **claims},
                          AUTH_SECRET, algorithm="HS256")

    cases = {
        # The server names this refusal itself (data.reason), with `vera connect` as the fix.
        "token_expired": token(exp=int(time.time()) - 3600),
        "wrong_audience": token(aud="https://another-service.example"),
        "insufficient_scope": token(scope="memory:propose"),
        "rejected": token(iss="https://someone-else.example"),
    }
    # Without `vera` on its PATH the runtime cannot renew its token, and neither does
    # doctor: it reports the gateway's refusal of the token in the file.
    unrenewed = {**env, "PATH": f"{runtime_bin}:/usr/bin:/bin"}

    def doctor(presented: str, env: dict[str, str] = unrenewed) -> subprocess.CompletedProcess:
        # the user's own token file, replaced
        (repo / credential_files("codex").token).write_text(presented)
        return run_vera(repo, env, "doctor", "codex")

    for reason, presented in cases.items():
        report = doctor(presented)
        line = tools_line(report.stdout)
        assert line.startswith(f"TODO vera tools visible: cannot list tools: {reason}: "), (
            reason, report.stdout)
        assert presented not in report.stdout + report.stderr
    assert "memory:read" in tools_line(doctor(cases["insufficient_scope"]).stdout)
    assert AUTH_AUDIENCE in tools_line(doctor(cases["wrong_audience"]).stdout)
    good = doctor(stored)
    assert tools_line(good.stdout).startswith("ok   vera tools visible: ")
    # With it, doctor renews an ended token as Codex's headers helper would.
    renewed = doctor(cases["token_expired"], env)
    assert tools_line(renewed.stdout).startswith("ok   vera tools visible: "), renewed.stdout
    assert (repo / credential_files("codex").token).read_text() not in cases.values()
