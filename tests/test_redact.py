"""trajcomp.core.summary.redact: every secret pattern, ordinary text left alone, and the texts redaction keeps whole."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trajcomp.core.summary.redact import REDACTED, kept_whole, redact
import trajcomp.core.summary.redact as redact_module

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEA7v1xQm3nq0ZkR2c9bq1TQ0lH9k3w8sYb\n"
    "Zt0q9W1c1xYpHh2mYv9Yq3uQx8m0c2s5d7e8f9g0h1i2j3k4\n"
    "-----END RSA PRIVATE KEY-----"
)

# (text containing a secret, the secret itself, what must survive around it)
SECRETS = [
    pytest.param(f"key file:\n{PEM}\ndone", PEM, ("key file:", "done"), id="pem-rsa"),
    pytest.param("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
                 "b3BlbnNzaC1rZXktdjEAAAAA", (), id="pem-openssh"),
    pytest.param("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n(output truncated)",
                 "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", (), id="pem-unterminated"),
    pytest.param("export OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx", "sk-abcdefghijklmnopqrstuvwx",
                 ("export OPENAI_API_KEY=",), id="sk-plain"),
    pytest.param("key sk-proj-AbCdEfGhIjKlMnOpQrStUv_12-34 set", "sk-proj-AbCdEfGhIjKlMnOpQrStUv_12-34",
                 ("key ", " set"), id="sk-proj"),
    pytest.param("ANTHROPIC=sk-ant-api03-abcdefghijklmnopqrstuv", "sk-ant-api03-abcdefghijklmnopqrstuv", (),
                 id="sk-ant"),
    pytest.param("router sk-or-v1-0123456789abcdef0123", "sk-or-v1-0123456789abcdef0123", ("router",),
                 id="sk-openrouter"),
    pytest.param("git clone https://ghp_ABCDEFGHIJKLMNOPQRSTuvwxyz0123@github.com/o/r",
                 "ghp_ABCDEFGHIJKLMNOPQRSTuvwxyz0123", ("git clone https://", "@github.com/o/r"), id="ghp"),
    pytest.param("token gho_abcdefghijklmnopqrstuvwxyz in config", "gho_abcdefghijklmnopqrstuvwxyz",
                 ("in config",), id="gho"),
    pytest.param("ghs_0123456789abcdefghijABCD", "ghs_0123456789abcdefghijABCD", (), id="ghs"),
    pytest.param("pat github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
                 ("pat ",), id="github-pat"),
    pytest.param("aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE", ("aws_access_key_id",),
                 id="akia"),
    pytest.param("session ASIAY34FZKBOKMUTVV7A expired", "ASIAY34FZKBOKMUTVV7A", ("session", "expired"), id="asia"),
    pytest.param("SLACK=xoxb-123456789012-1234567890123-AbCdEf", "xoxb-123456789012-1234567890123-AbCdEf", (),
                 id="slack"),
    pytest.param("login with hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
                 ("login with",), id="huggingface"),
    pytest.param("Authorization: Bearer abc.def.ghi", "abc.def.ghi", ("Authorization:",), id="bearer-jwt"),
    pytest.param("curl -H 'authorization: bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig_-x' x",
                 "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig_-x", ("curl -H",), id="bearer-lowercase"),
    pytest.param("password=hunter2", "hunter2", ("password=",), id="password-assign"),
    pytest.param("mysql -u root --password=hunter2 db", "hunter2", ("--password=", " db"), id="password-flag"),
    pytest.param('{"password": "hunter2", "user": "bob"}', "hunter2", ('"password": "', '"user": "bob"'),
                 id="password-json"),
    pytest.param("PASSWD: 's3cr3t!!'", "s3cr3t!!", ("PASSWD: '",), id="passwd-quoted"),
    pytest.param("pwd=abcd1234&next=/home", "abcd1234", ("pwd=", "&next=/home"), id="pwd-query"),
    pytest.param("secret: topsecretvalue", "topsecretvalue", ("secret: ",), id="secret"),
    pytest.param('"api_key": "abcd1234"', "abcd1234", ('"api_key": "',), id="api_key-json"),
    pytest.param("api-key: zyxw9876", "zyxw9876", ("api-key: ",), id="api-key-header"),
    pytest.param("apikey=zyxw9876", "zyxw9876", ("apikey=",), id="apikey"),
    pytest.param("access_token=ya29.A0ARrdaM", "ya29.A0ARrdaM", ("access_token=",), id="access_token"),
    pytest.param("auth-token: 9f8e7d6c5b4a", "9f8e7d6c5b4a", ("auth-token: ",), id="auth-token"),
    pytest.param("token=abcd1234; path=/", "abcd1234", ("token=", "; path=/"), id="token-cookie"),
]


@pytest.mark.parametrize("text, secret, kept", SECRETS)
def test_each_secret_pattern_is_redacted(text: str, secret: str, kept: tuple[str, ...]) -> None:
    out = redact(text)
    assert secret not in out
    assert REDACTED in out
    for piece in kept:
        assert piece in out, f"{piece!r} should survive in {out!r}"


def test_assignment_keeps_the_key_and_hides_only_the_value() -> None:
    assert redact("password=hunter2") == "password=[REDACTED]"
    assert redact('"password": "hunter2"') == '"password": "[REDACTED]"'
    assert redact("api_key: abcd1234 (rotated)") == "api_key: [REDACTED] (rotated)"


def test_known_values_are_replaced_even_when_no_pattern_matches() -> None:
    key = "local-deployment-key-42"  # matches none of the patterns
    assert redact(f"sent {key} twice: {key}.", key) == "sent [REDACTED] twice: [REDACTED]."
    assert redact("nothing here", None, "") == "nothing here"  # empty / None known values are ignored


def test_many_secrets_in_one_text_are_all_redacted() -> None:
    values = ["sk-abcdefghijklmnopqrstuvwx", "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
              "AKIAIOSFODNN7EXAMPLE", "hunter2", "abc.def.ghi", "MIIEowIBAAKCAQEA7v1xQm3nq0ZkR2c9bq1TQ0lH9k3w8sYb"]
    text = ("The assistant found sk-abcdefghijklmnopqrstuvwx and ghp_abcdefghijklmnopqrstuvwxyz0123456789 in .env, "
            "an AWS key AKIAIOSFODNN7EXAMPLE, password=hunter2, the header Bearer abc.def.ghi and\n" + PEM +
            "\nthen it ran pytest (3 passed).")
    out = redact(text)
    for value in values:
        assert value not in out
    assert out.count(REDACTED) == 6
    assert out.startswith("The assistant found ") and out.endswith("then it ran pytest (3 passed).")


def test_redact_is_idempotent() -> None:
    text = "password=hunter2 sk-abcdefghijklmnopqrstuvwx Bearer abc.def.ghi"
    once = redact(text)
    assert redact(once) == once


ORDINARY = [
    pytest.param("def main(argv):\n    return run(argv[1:])\n", id="code-def"),
    pytest.param("tokenizer = AutoTokenizer.from_pretrained(name, use_fast=True)", id="tokenizer-assign"),
    pytest.param("for token in tokens:\n    if token == '':\n        continue", id="token-loop"),
    pytest.param("max_tokens=512, num_tokens: 300, total_tokens = 812", id="token-counts"),
    pytest.param('{"max_tokens": 1500, "token_count": 12, "tokens": 40}', id="token-json"),
    pytest.param("The password policy requires 12 characters; the secret santa list is in notes.md", id="prose"),
    pytest.param("the token is valid and the tokenizer splits words into tokens", id="token-words"),
    pytest.param("Bearer tokens expire after 1h", id="bearer-prose-short"),
    pytest.param("see /home/user/.ssh/id_rsa.pub and src/auth/token_store.py:42", id="paths"),
    pytest.param("C:\\Users\\dev\\secrets\\README.txt", id="windows-path"),
    pytest.param("git checkout 3f2a9c1e4b7d8a0f6e5d4c3b2a1f0e9d8c7b6a5f", id="git-sha"),
    pytest.param("sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", id="sha256"),
    pytest.param("uuid 123e4567-e89b-12d3-a456-426614174000, md5 d41d8cd98f00b204e9800998ecf8427e", id="uuid-md5"),
    pytest.param("task-runner-configuration-manager and risk-assessment-framework", id="kebab-words"),
    pytest.param("sk-short is not a key; AKIAIOSFODNN7EXAMPLEX is too long", id="near-misses"),
    pytest.param("token=abc pwd=xyz", id="short-values"),  # values under 4 chars are left alone
    pytest.param("Traceback (most recent call last):\n  File \"src/app.py\", line 12\nAssertionError: expected 3",
                 id="traceback"),
    pytest.param("我们需要修复解析器中的错误，然后重新运行测试。", id="chinese"),
    pytest.param("", id="empty"),
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_not_redacted(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize("text, secret", [
    ("export POSTGRES_PASSWORD=supersecret", "supersecret"),
    ("DB_PASSWORD=hunter2xyz", "hunter2xyz"),
    ("GITHUB_TOKEN=abcd1234efgh", "abcd1234efgh"),
    ("MY_API_KEY=zyxw98765432", "zyxw98765432"),
])
def test_env_style_secret_assignments_are_redacted(text: str, secret: str) -> None:
    assert secret not in redact(text)


def test_quoted_passphrase_is_redacted_whole() -> None:
    out = redact('password: "correct horse battery staple"')
    assert "horse battery staple" not in out


def test_bearer_in_prose_is_not_redacted() -> None:
    text = "The API uses the Bearer authentication scheme."
    assert redact(text) == text


def test_type_annotated_code_is_not_redacted() -> None:
    text = "def login(user: str, token: Optional[str] = None) -> Session:"
    assert redact(text) == text


_SECRET_TEXTS = [p.values[0] for p in SECRETS] + [p.values[1] for p in SECRETS]
_PIECES = _SECRET_TEXTS + [
    "/srv/app/main.py", "https://example.com/a?b=1", "ValueError", "3.14", "deadbeefcafe", "Bearer", "abc.def.ghi",
    "password", "=", ": ", "\n", " ", "token", "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----",
    "sk-", "abcdefghijklmnopqrstuvwxyz", "'", '"', "KNOWNSECRET",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_PIECES), max_size=4).map("".join), max_size=12),
       st.sampled_from([(), ("KNOWNSECRET",), (None, "abcd1234")]))
def test_kept_whole_is_the_texts_that_redaction_leaves_alone(texts: list[str], known: tuple) -> None:
    """The one-pass shortcut over the joined texts never keeps a text that redaction would change."""
    assert kept_whole(texts, *known) == [t for t in texts if redact(t, *known) == t]


def every_pattern(text: str) -> str:
    """Redaction without the words that spare a text a pattern's scan: each pattern run over it."""
    for pattern, _ in redact_module._PATTERNS:
        text = pattern.sub(REDACTED, text)
    return redact_module._ASSIGNMENT.sub(redact_module._hide_value, text)


# The words' cases and the four characters re.IGNORECASE matches to an ASCII letter (ı, ſ, İ and the
# Kelvin sign), inside words too, beside every piece above.
_CASED = _PIECES + ["BEARER abcdef123456", "PaSsWoRd=hunter2xyz", "paſſword=hunter2xyz", "apı_key=zyxw98765432",
                    "ſecret: 'a b c d'", "Token = abcd1234", "ghp_", "AKIA", "xoxb-", "hf_", "github_pat_", "İ", "\u212a",
                    "apİ_key=zyxw98765432", "to\u212aen = abcd1234", "BEARİ"]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(_CASED) | st.text(max_size=6), max_size=10).map("".join))
def test_the_words_that_spare_a_scan_never_change_what_is_hidden(text: str) -> None:
    assert redact(text) == every_pattern(text)
