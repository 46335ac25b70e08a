"""Secret detection/redaction. Every secret is assembled from pieces at runtime so that no
realistic credential literal lives in the repository (push protection and scanners flag them)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zmem.capture.secrets import SecretMatch, find_secrets, looks_like_secret, redact

B62 = "aB3dE5gH7jK9mN1pQ2rS4tU6vW8xY0zC"  # 32 mixed base62 chars, reused to build bodies


def body(n: int) -> str:
    return (B62 * (n // len(B62) + 1))[:n]


PEM_KIND = "RSA " + "PRIVATE KEY"
PEM = f"-----BEGIN {PEM_KIND}-----\nMIIEow{body(60)}\n{body(64)}==\n-----END {PEM_KIND}-----"

# (kind, secret text, full input); the secret must vanish and the prose around it survive.
POSITIVES: list[tuple[str, str, str]] = [
    ("github_token", "ghp_" + "A" * 36, "push with {} then rotate"),
    ("github_token", "gho_" + body(36), "oauth {} here"),
    ("github_token", "ghs_" + body(36), "app token {}."),
    ("github_token", "github_pat_" + body(22) + "_" + body(59), "fine grained {} ok"),
    ("openai_key", "sk-" + body(48), "OPENAI key {} in env"),
    ("openai_key", "sk-proj-" + body(40) + "-" + body(20), "project key {} works"),
    ("anthropic_key", "sk-ant-api03-" + body(80) + "AA", "claude {} there"),
    ("aws_access_key", "AKIA" + "Z7Q2X9W4E1R8T5Y3", "key id {} for prod"),
    ("aws_access_key", "ASIA" + "Z2X3C4V5B6N7M8Q9", "sts id {} expires"),
    ("aws_secret_key", "Ab1/" * 10, "aws_secret_access_key = {}\nregion=x"),
    ("aws_secret_key", "9zY+" * 10, '"SecretAccessKey": "{}",'),
    # Unlabeled, beside the word AWS (issue 34): a random-looking 40-character key.
    ("aws_secret_key_unlabeled", body(36) + "/k+Q", "AWS login for the deploy user: {} (rotate)"),
    ("aws_secret_key_unlabeled", "Zq7" + body(37), "aws configure asks for it: {}"),
    ("private_key", PEM, "key file:\n{}\nend of note"),
    ("bearer_token", "abc123" + body(20), "curl -H 'Authorization: Bearer {}' api"),
    ("bearer_token", body(30), "then send bearer {} to the API"),
    ("slack_token", "xoxb-" + "123456789012-1234567890123-" + body(24), "slack {} bot"),
    ("slack_token", "xoxp-" + "1234567890-" + body(20), "user {} token"),
    ("google_api_key", "AIza" + body(35), "maps key {} restricted"),
    ("stripe_key", "sk_live_" + body(24), "stripe {} live"),
    ("stripe_key", "rk_live_" + body(24), "restricted {} key"),
    ("stripe_key", "sk_test_" + body(24), "test mode {} key"),
    ("jwt", "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0In0." + body(43), "session {} expired"),
    ("npm_token", "npm_" + body(36), "publish with {} only"),
    ("url_credentials", "s3cr3t-Pw", "DATABASE_URL=postgres://admin:{}@db.internal:5432/app"),
    ("url_credentials", "hunter2", "redis://:{}@cache:6379/0 is the cache"),
    ("password_assignment", "Tr0ub4dor&3", "set password={} in the fixture"),
    ("password_assignment", "correct-h0rse-9", 'db: passwd: "{}"'),
    ("password_assignment", "q9Lm2Vx8Rt", "api_key = '{}' # rotate monthly"),
    ("password_assignment", "k8s-s3cret-value", "SECRET_KEY={} then restart"),
    ("password_assignment", "1f9c2e7a8b", "GITHUB_TOKEN={} in the runner"),
    ("password_assignment", "p@ssW0rd99", "password: {}\nuser: admin"),
]


@pytest.mark.parametrize(("kind", "secret", "template"), POSITIVES)
def test_detects_and_redacts_each_kind(kind: str, secret: str, template: str) -> None:
    text = template.format(secret)
    found = find_secrets(text)
    assert [m.kind for m in found] == [kind], found
    assert looks_like_secret(text)

    out, count = redact(text)
    assert count == 1
    assert secret not in out
    assert f"[REDACTED:{kind}]" in out
    before, after = template.split("{}")
    assert out == before + f"[REDACTED:{kind}]" + after


def test_every_kind_has_a_positive_example() -> None:
    kinds = set(
        "github_token openai_key aws_access_key aws_secret_key private_key bearer_token"
        " slack_token google_api_key stripe_key jwt npm_token url_credentials"
        " password_assignment anthropic_key aws_secret_key_unlabeled".split()
    )
    assert {k for k, _, _ in POSITIVES} == kinds


def test_pem_without_end_line_redacts_to_end_of_text() -> None:
    text = f"note\n-----BEGIN OPENSSH {'PRIVATE KEY'}-----\nb3Blbn{body(70)}\n{body(70)}"
    out, count = redact(text)
    assert (out, count) == ("note\n[REDACTED:private_key]", 1)


def test_bearer_keeps_the_word_and_removes_the_token() -> None:
    token = "eyJ" + body(30)  # not a full JWT: only one segment
    out, _ = redact(f"Authorization: Bearer {token}")
    assert out == "Authorization: Bearer [REDACTED:bearer_token]"


def test_matches_are_sorted_and_non_overlapping() -> None:
    text = " ".join(template.format(secret) for _, secret, template in POSITIVES)
    found = find_secrets(text)
    assert len(found) == len(POSITIVES)
    assert found == sorted(found, key=lambda m: m.start)
    assert all(a.end <= b.start for a, b in zip(found, found[1:], strict=False))


def test_overlap_keeps_the_more_specific_kind() -> None:
    # The assignment pattern covers exactly the token: equal spans go to the specific kind.
    text = 'token = "ghp_' + "B" * 36 + '"'
    assert [m.kind for m in find_secrets(text)] == ["github_token"]
    text = "Authorization: Bearer " + "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIx." + body(20)
    assert [m.kind for m in find_secrets(text)] == ["jwt"]


def test_overlap_keeps_the_longer_match_and_covers_both() -> None:
    # The password value extends past the embedded token: the whole value goes.
    value = "prefix-ghp_" + "C" * 36 + "!x"
    text = f"password={value} done"
    assert find_secrets(text) == [SecretMatch("password_assignment", 9, 9 + len(value))]


NEGATIVES = [
    "use sk-learn for the model",
    "the task-runner skips tests",
    "set the password via the PASSWORD env var",
    "token budget is 1500",
    "ghp is the prefix of GitHub tokens",
    "3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39",
    "commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39 fixed it",
    "123e4567-e89b-12d3-a456-426614174000",
    "Bearer tokens go in the Authorization header",
    "/home/dev/.config/zmem/secrets/token_cache.json",
    "src/zmem/capture/secrets.py",
    "export TOKEN=$TOKEN",
    "token=${GITHUB_TOKEN}",
    'api_key = "<your-token>"',
    "password=xxxxxxxxxx",
    "password: changeme",
    "secret_key=********",
    "password=password",
    "api_key=os.environ['OPENAI_API_KEY']",
    "token = settings.github_token",
    "password=hashlib.sha256(raw).hexdigest()",
    "api_key=OPENAI_API_KEY",
    "max_token=80000000",
    "Token: authentication tokens expire after an hour",
    "Secret: rotate the signing key every 90 days",
    "private_key=~/.ssh/id_ed25519",
    "the sk-proj- prefix marks project keys",
    "sk-use-the-kebab-case-identifier-name",
    "sk_test_fixtures_are_reused",
    "run tests with -k test_token_refresh",
    "https://example.com:8443/path?user=a@b",
    "ssh://git@github.com:22/org/repo.git",
    "postgres://user:${DB_PASSWORD}@localhost/app",
    "curl -H 'Authorization: Bearer $TOKEN' https://api.example.com",
    "AKIA is the prefix for long-term AWS key ids",
    "xoxb-your-bot-token-here",
    "if password == other_password: return",
    "the JWT header starts with eyJ",
    # 40-character tokens beside AWS that are not keys: a name, a hash, a path, no context.
    "aws s3 sync runs ApplicationConfigurationManagerFactory12 nightly",
    "aws commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39 fixed uploads",
    "AWS handler src/handlers/ProcessIncomingOrders/index12.ts",
    body(36) + "/k+Q is a random token with no cloud context nearby",
]


@pytest.mark.parametrize("text", NEGATIVES)
def test_ordinary_text_does_not_match(text: str) -> None:
    assert find_secrets(text) == []
    assert not looks_like_secret(text)
    assert redact(text) == (text, 0)


def test_redacted_output_is_stable() -> None:
    text = " and ".join(template.format(secret) for _, secret, template in POSITIVES)
    once, count = redact(text)
    assert count == len(POSITIVES)
    assert redact(once) == (once, 0)


@pytest.mark.parametrize(
    "text",
    [
        "a" * 65_536,
        "-----BEGIN " * 6_000,
        "-----BEGIN RSA PRIVATE KEY-----" * 2_000,
        "eyJ" * 21_845,
        "eyJa." * 13_107,
        "sk-" * 21_845,
        "ghp_" * 16_384,
        "password=" * 7_281,
        'token="' * 9_362,
        "token: " + "x1" * 32_000,
        "Bearer " * 9_362,
        "bearer " + "." * 65_000,
        "https://a:" * 6_553,
        "a://" + "b" * 65_000 + ":",
        "aws_secret_key=" * 4_369,
        ("xoxb-" + "1" * 20) * 2_500,
        "AIza" * 16_384,
    ],
)
def test_adversarial_64k_inputs_complete(text: str) -> None:
    # Correctness only; a regression to catastrophic backtracking would hang, not fail.
    find_secrets(text)


# Pieces that half-form secrets, so random concatenations probe boundaries between kinds.
_PIECES = (
    'password=|token: |api_key = "|"|\'|Bearer |Authorization: Bearer |https://u:|@host|ghp_'
    "|sk-|sk-ant-|AKIA|xoxb-|AIza|npm_|eyJ|.|-----BEGIN RSA PRIVATE KEY-----"
    "|-----END RSA PRIVATE KEY-----|aws_secret_access_key=|sk_live_|[REDACTED:jwt]| |\n|_|-|/"
    "|:|=|$|{|}|(|[|]|#|,|@|://|1234567890"
).split("|")
_FRAGMENTS = st.sampled_from([*_PIECES, body(8), body(20), body(36), "A" * 16, "Ab1/" * 10])
_MIXED = st.lists(st.one_of(_FRAGMENTS, st.text(max_size=12)), max_size=30).map("".join)


@settings(max_examples=400, deadline=None)
@given(_MIXED)
def test_redact_is_idempotent(text: str) -> None:
    once, _ = redact(text)
    assert find_secrets(once) == []
    assert redact(once) == (once, 0)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_redact_is_idempotent_on_arbitrary_text(text: str) -> None:
    once, _ = redact(text)
    assert redact(once) == (once, 0)


def test_an_unlabeled_aws_pair_is_redacted_whole() -> None:
    """The access key id and its secret, as people paste them (issue 34): both go."""
    key_id, secret = "AKIA" + "Z7Q2X9W4E1R8T5Y3", "Qw8" + body(35) + "+Z"
    out, count = redact(f"creds: {key_id} / {secret}")
    assert count == 2 and key_id not in out and secret not in out
    assert out == "creds: [REDACTED:aws_access_key] / [REDACTED:aws_secret_key_unlabeled]"


def test_the_kept_benign_corpus_holds_no_secret() -> None:
    """tests/data/secrets_benign.jsonl: text about AWS with 40-character tokens that are not
    keys (commit hashes, digests, names, paths, ARNs), and ZMem's own eval corpora of coding
    memories: none may be redacted."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    texts = [
        json.loads(line)["text"]
        for line in (root / "tests" / "data" / "secrets_benign.jsonl").read_text().splitlines()
    ]
    for name in ("coding_corpus.jsonl", "paraphrase_corpus.jsonl", "gold.jsonl"):
        for line in (root / "eval" / name).read_text().splitlines():
            doc = json.loads(line)
            texts += [doc[k] for k in ("content", "text", "query") if isinstance(doc.get(k), str)]
    assert len(texts) > 500
    hits = [
        (t, m.kind) for t in texts for m in find_secrets(t) if m.kind == "aws_secret_key_unlabeled"
    ]
    assert hits == []
