import pytest

from vera.repository_identity import canonicalize


@pytest.mark.parametrize(
    ("remote", "expected"),
    [
        # https, with and without .git, trailing slashes, credentials, query, fragment
        ("https://github.com/Acme/Payments", "github.com/Acme/Payments"),
        ("https://github.com/Acme/Payments.git", "github.com/Acme/Payments"),
        ("https://github.com/Acme/Payments/", "github.com/Acme/Payments"),
        ("https://github.com/Acme/Payments.git/", "github.com/Acme/Payments"),
        ("https://GitHub.COM/Acme/Payments", "github.com/Acme/Payments"),
        ("https://user:secret@github.com/Acme/Payments.git", "github.com/Acme/Payments"),
        ("https://ghp_abc123TOKEN@github.com/Acme/Payments", "github.com/Acme/Payments"),
        (
            "https://x-access-token:ghs_TOKEN@github.com/Acme/Payments.git",
            "github.com/Acme/Payments",
        ),
        ("https://github.com/Acme/Payments.git?token=abc#readme", "github.com/Acme/Payments"),
        ("https://github.com/Acme/Payments?ref=main", "github.com/Acme/Payments"),
        ("  https://github.com/Acme/Payments.git  ", "github.com/Acme/Payments"),
        ("HTTPS://github.com/Acme/Payments", "github.com/Acme/Payments"),
        ("http://git.example.org/Team/Repo", "git.example.org/Team/Repo"),
        ("https://github.com/Acme/Payments.GIT", "github.com/Acme/Payments"),
        # ports are dropped: one repository over ssh:2222 and https is one identity
        ("https://github.com:443/Acme/Payments", "github.com/Acme/Payments"),
        ("http://git.example.org:80/Team/Repo", "git.example.org/Team/Repo"),
        ("https://git.example.org:8443/Team/Repo", "git.example.org/Team/Repo"),
        ("ssh://git@github.com:22/Acme/Payments.git", "github.com/Acme/Payments"),
        (
            "ssh://git@gitlab.example.com:2222/Group/Sub/Repo.git",
            "gitlab.example.com/Group/Sub/Repo",
        ),
        ("git://github.com:9418/Acme/Payments.git", "github.com/Acme/Payments"),
        # ssh and git schemes
        ("ssh://git@github.com/Acme/Payments.git", "github.com/Acme/Payments"),
        ("ssh://github.com/Acme/Payments", "github.com/Acme/Payments"),
        ("git+ssh://git@github.com/Acme/Payments.git", "github.com/Acme/Payments"),
        ("ssh+git://git@github.com/Acme/Payments.git", "github.com/Acme/Payments"),
        ("git://github.com/Acme/Payments.git", "github.com/Acme/Payments"),
        # scp form
        ("git@github.com:Acme/Payments.git", "github.com/Acme/Payments"),
        ("git@github.com:Acme/Payments", "github.com/Acme/Payments"),
        ("git@GitHub.com:Acme/Payments.git/", "github.com/Acme/Payments"),
        ("github.com:Acme/Payments.git", "github.com/Acme/Payments"),
        ("org-123@ssh.dev.azure.com:v3/Org/Proj/Repo", "ssh.dev.azure.com/v3/Org/Proj/Repo"),
        ("git@host.example:/srv/git/Repo.git", "host.example/srv/git/Repo"),
        # nested groups, path case preserved, duplicate slashes collapsed
        ("https://gitlab.com/Group/SubGroup/Repo.git", "gitlab.com/Group/SubGroup/Repo"),
        ("https://github.com//Acme//Payments", "github.com/Acme/Payments"),
        # IP hosts
        ("https://10.0.0.5/Team/Repo.git", "10.0.0.5/Team/Repo"),
        ("ssh://git@[2001:DB8::1]:2222/Team/Repo", "[2001:db8::1]/Team/Repo"),
        # already canonical identities are fixed points
        ("github.com/Acme/Payments", "github.com/Acme/Payments"),
        ("GitHub.com/Acme/Payments", "github.com/Acme/Payments"),
        ("[2001:db8::1]/Team/Repo", "[2001:db8::1]/Team/Repo"),
    ],
)
def test_canonicalizes_supported_remotes(remote: str, expected: str) -> None:
    assert canonicalize(remote) == expected


@pytest.mark.parametrize(
    "remote",
    [
        "",
        "   ",
        "garbage",
        "not a url",
        "Acme/Payments",
        "/home/dev/src/payments",
        "./payments",
        "../payments",
        "~/src/payments",
        "C:\\Users\\dev\\payments",
        "C:/Users/dev/payments",
        "file:///home/dev/payments.git",
        "file://localhost/srv/repo.git",
        "ftp://example.com/Acme/Payments",
        "svn+ssh://example.com/Acme/Payments",
        "https://",
        "https:///Acme/Payments",
        "https://user:pass@/Acme/Payments",
        "https://github.com",
        "https://github.com/",
        "https://github.com/.git",
        "https://github.com/Acme/../Payments",
        "https://github.com/Acme/./Payments",
        "https://github.com:notaport/Acme/Payments",
        "https://github.com:99999/Acme/Payments",
        "https://bad host/Acme/Payments",
        "https://github.com/Acme/Pay ments",
        "https://exa_mple..com/Acme/Payments",
        "git@github.com:",
        "git@:Acme/Payments",
        "ssh://git@github.com:Acme/Payments.git",
        "https://github.com/Acme/\nPayments",
        "https://github.com/Acme/Pay\x00ments",
        "https://github.com/" + "a" * 3000,
    ],
)
def test_rejects_unsupported_remotes(remote: str) -> None:
    assert canonicalize(remote) is None


def test_rejects_non_strings() -> None:
    assert canonicalize(None) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "remote",
    [
        "https://user:secret@github.com/Acme/Payments.git?token=abc",
        "git@github.com:Acme/Payments.git",
        "ssh://git@gitlab.example.com:2222/Group/Repo.git",
    ],
)
def test_is_idempotent_and_never_keeps_credentials(remote: str) -> None:
    canonical = canonicalize(remote)
    assert canonical is not None
    assert canonicalize(canonical) == canonical
    for secret in ("secret", "token", "user", "git@", "?", "#"):
        assert secret not in canonical
