"""Secret screening: credentials are found by shape, ordinary prose passes."""

from __future__ import annotations

import threading
import uuid

import pytest

from vera import secret_screen
from vera.errors import InvalidInput
from vera.knowledge.v1 import knowledge_service_pb2 as pb
from vera.secret_screen import find_secret, screen, shannon_entropy

# Built by concatenation so this file itself never carries a literal credential shape
# that repository scanners would flag.
AWS = "AKIA" + "IOSFODNN7EXAMPLE"
GHP = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
GH_PAT = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"
SLACK = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
JWT = (
    "eyJ" + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJ" + "zdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM = "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA...\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (f"the deploy user key is {AWS}", "aws_access_key"),
        (f"AWS_ACCESS_KEY_ID={AWS}", "aws_access_key"),
        (f"use {GHP} for the CI", "github_token"),
        (f"token: {GH_PAT}", "github_token"),
        ("glpat-" + "abcdEFGH1234ijklMNOP5678", "gitlab_token"),
        (f"slack bot token {SLACK}", "slack_token"),
        ("https://hooks.slack.com/services/" + "T0001/B0002/AbCdEfGhIjKl1234", "slack_webhook"),
        ("sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", "stripe_key"),
        ("OPENAI_API_KEY=sk-" + "proj-Abc123Def456Ghi789Jkl012", "openai_key"),
        ("AIza" + "SyA1234567890abcdefghijklmnopqrstuv", "google_api_key"),
        ("npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "npm_token"),
        (f"session cookie {JWT}", "jwt"),
        (PEM, "private_key"),
        ("-----BEGIN " + "OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA", "private_key"),
        ("-----BEGIN " + "PRIVATE KEY-----", "private_key"),
        ("postgres://payments:" + "S3cr3tPass@db.internal:5432/payments", "connection_string"),
        ("postgresql://app:" + "hunter2@localhost/app", "connection_string"),
        ("redis://:" + "a9f8e7d6c5@cache:6379/0", "connection_string"),
        ("mongodb+srv://svc:" + "Pa55w0rd!@cluster0.mongodb.net", "connection_string"),
        ("https://deploy:" + "ghs-token-xyz@git.example.com/repo", "connection_string"),
        ("Server=db;User Id=sa;Password=" + "Xk92_lmQ;", "connection_string"),
        ("Authorization: Bearer " + "abc123DEF456ghi789JKL012mno", "bearer_token"),
        ("curl -H 'Authorization: Basic " + "dXNlcjpwYXNzd29yZDEyMw=='", "basic_auth"),
        ("api_key=" + "9f8a7c6b5d4e3f2a1b0c9d8e", "assigned_secret"),
        ('"client_secret": "' + 'Qm9vdFN0cmFwU2VjcmV0MTIz"', "assigned_secret"),
        ("export STRIPE_SECRET=" + "whsec_5WbX5kEWLlfzsGNjH64I8lOOqUB6e8FH", "assigned_secret"),
        ("db password: " + "Tr0ub4dor&3xyzQ", "assigned_secret"),
        ("SECRET_KEY = '" + "django-insecure-8f$2k#9x!q@1z'", "assigned_secret"),
    ],
)
def test_credentials_are_found(text: str, kind: str) -> None:
    assert find_secret(text) == kind


@pytest.mark.parametrize(
    "text",
    [
        "",
        "payments-api uses PostgreSQL 16",
        "the API key is stored in Vault under secret/payments/prod",
        "rotate the password every 90 days",
        "api_key=${PAYMENTS_API_KEY}",
        "api_key=<your-api-key>",
        "password: changeme",
        "token=xxxxxxxxxxxxxxxx",
        "secret_name = payments-prod-db-credentials",
        "the token refresh happens in auth/refresh_token.py",
        "bearer tokens are validated by the gateway middleware",
        "postgres://db.internal:5432/payments",
        "postgresql://payments@db.internal/payments",
        "DATABASE_URL=postgres://user:${DB_PASSWORD}@db/app",
        "https://github.com/acme/payments.git",
        "AKIA is the prefix of AWS access key ids",
        "the task-management-service owns retries",
        "retries_webhooks three times with backoff",
        "commit 3f2a9c1b7e4d5a6f8b9c0d1e2f3a4b5c6d7e8f90 fixed the bug",
        "uuid 0b0f6c8e-1b7e-4a53-9d0f-6d8e1f2a3b4c identifies the tenant",
        "timeout_secret = 30",
        "password_policy: min_length_twelve_chars",
    ],
)
def test_ordinary_text_passes(text: str) -> None:
    assert find_secret(text) is None


def test_entropy() -> None:
    assert shannon_entropy("") == 0.0
    assert shannon_entropy("aaaa") == 0.0
    assert shannon_entropy("abcd") == pytest.approx(2.0)


def test_screen_names_the_field_and_never_echoes_the_secret() -> None:
    with pytest.raises(InvalidInput) as caught:
        screen([("subject", "payments"), ("evidence_text", f"key {AWS}")])
    err = caught.value
    assert err.field == "evidence_text"
    assert err.metadata["reason"] == "secret"
    assert err.metadata["secret_kind"] == "aws_access_key"
    assert AWS not in err.message and all(AWS not in v for v in err.metadata.values())


def test_screen_passes_clean_fields() -> None:
    screen([("subject", "payments"), ("object", "PostgreSQL 16"), ("evidence_text", "")])


@pytest.mark.parametrize("filler", ["token_", "secret_key_", "_" * 6, "password"])
def test_repeated_secret_names_at_the_largest_bound_are_not_a_secret(filler: str) -> None:
    # The old name pattern backtracked cubically on this shape (2 s at 2 KiB, minutes at
    # 8 KiB). How the screen's time grows with the text is measured by bench.secret_screen
    # (these shapes included), not by a stopwatch here.
    text = (filler * 8192)[:8192]
    assert find_secret(text) is None


async def test_proposals_are_screened_off_the_serving_loop(stub, monkeypatch) -> None:
    """The screen is CPU work over up to ~10 KiB per proposal: the service's event loop,
    which serves every other call, never runs it."""
    screened_on: list[int] = []
    real = secret_screen.find_secret

    def recording(text: str) -> str | None:
        screened_on.append(threading.get_ident())
        return real(text)

    monkeypatch.setattr(secret_screen, "find_secret", recording)
    request = pb.ProposeFactRequest(
        principal_id=str(uuid.uuid4()),
        personal_scope_id=str(uuid.uuid4()),
        subject="billing-api",
        predicate="depends_on",
        object="api_key=" + "9f8a7c6b5d4e3f2a1b0c9d8e",
        context=pb.TaskContext(runtime="claude-code", session_ref="s-1", task_ref="t-1"),
    )
    with pytest.raises(InvalidInput) as refused:
        await stub.ProposeFact(request)
    assert (refused.value.field, refused.value.metadata["reason"]) == ("object", "secret")
    assert screened_on and threading.get_ident() not in screened_on
