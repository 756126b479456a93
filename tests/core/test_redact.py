"""Secret redaction: what must be masked, what must survive, and the real outputs untouched."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cockpit.fleet.redact import REDACTED, redact
from cockpit.sim.kube.objects import NODE_DOCUMENT

# Fake secrets assembled at run time so no secret scanner mistakes this file for a leak.
GH = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
GH_PAT = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"
HF = "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567"
AWS = "AKIA" + "IOSFODNN7EXAMPLE"
SLACK = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
JWT = "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0." + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
NGC = "nvapi-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa"


@pytest.mark.parametrize(
    ("text", "secret", "kept"),
    [
        ("Authorization: Bearer abcdef0123456789abcdef", "abcdef0123456789abcdef", "Authorization: Bearer "),
        ("authorization: Basic dXNlcjpodW50ZXIy", "dXNlcjpodW50ZXIy", "authorization: Basic "),
        ("Proxy-Authorization: s3cr3tvalue", "s3cr3tvalue", "Proxy-Authorization: "),
        ('{"Authorization": "Bearer tok-0123456789abcdef"}', "tok-0123456789abcdef", '"Authorization": "Bearer '),
        ("curl -H 'X: y' --oauth2-bearer x; Bearer 0123456789abcdefXYZ", "0123456789abcdefXYZ", "Bearer "),
        ("password=hunter2 user=bob", "hunter2", "user=bob"),
        ("DB_PASSWORD='correct horse battery'", "correct horse battery", "DB_PASSWORD='"),
        ("passwd: swordfish", "swordfish", "passwd: "),
        ('{"client_secret": "s3cr3t-value", "id": 7}', "s3cr3t-value", '"id": 7'),
        ("{'api_key': 'sk_live_abc123'}", "sk_live_abc123", "'api_key': '"),
        ("export GITHUB_TOKEN=abc123def456", "abc123def456", "export GITHUB_TOKEN="),
        (
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "wJalrXUtnFEMI",
            "aws_secret_access_key = ",
        ),
        ("accessToken: qwerty12345", "qwerty12345", "accessToken: "),
        ("vllm serve m --api-key abc123xyz --port 8000", "abc123xyz", "--port 8000"),
        ("mysql --password=pa55word -h db", "pa55word", "-h db"),
        ("spring.datasource.password=Tr0ub4dor", "Tr0ub4dor", "spring.datasource.password="),
        (f"cloned with {GH} ok", GH, "cloned with "),
        (f"token {GH_PAT}", GH_PAT, "token "),
        (f"huggingface-cli login {HF}", HF, "huggingface-cli login "),
        (f"key id {AWS} in use", AWS, " in use"),
        (f"SLACK {SLACK}", SLACK, "SLACK "),
        ("POST https://hooks.slack.com/services/T000/B000/XXXXXXXX", "T000/B000/XXXXXXXX", "POST "),
        (f"cookie {JWT}", JWT, "cookie "),
        (f"NGC key {NGC}", NGC, "NGC key "),
        ("git clone https://bob:s3cret@git.example.com/r.git", "s3cret", "https://bob:"),
        ("postgres://svc:p%40ss@db:5432/x", "p%40ss", "@db:5432/x"),
    ],
)
def test_secret_is_masked_and_context_kept(text: str, secret: str, kept: str) -> None:
    out = redact(text)
    assert secret not in out
    assert REDACTED in out
    assert kept in out


def test_pem_private_key_block_masked_whole() -> None:
    body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ=="
    text = f"before\n-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n-----END OPENSSH PRIVATE KEY-----\nafter"
    out = redact(text)
    assert "MIIEvQ" not in out and "b3BlbnNz" not in out
    assert out == f"before\n-----BEGIN OPENSSH PRIVATE KEY-----\n{REDACTED}\n-----END OPENSSH PRIVATE KEY-----\nafter"


def test_pem_block_cut_short_is_masked_to_the_end() -> None:
    out = redact("x\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn")
    assert "MIIEpA" not in out
    assert out.startswith("x\n-----BEGIN RSA PRIVATE KEY-----")


def test_pem_inside_json_string() -> None:
    text = '{"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADAN\\n-----END PRIVATE KEY-----\\n"}'
    out = redact(text)
    assert "MIIEvQ" not in out
    assert out.startswith('{"private_key": "')


def test_public_material_is_not_a_secret() -> None:
    text = "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIE\n-----END CERTIFICATE-----\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA me@host"
    assert redact(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "Driver Version: 580.173.02     CUDA Version: 13.0",
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build",
        "GPU 0: NVIDIA H200 (UUID: GPU-4f3c2a1b-9d8e-7f60-5a4b-3c2d1e0f9a8b)",
        "00000000:1B:00.0 Off",
        "boot_id 3f2504e0-4f89-11d3-9a0c-0305e82c3301",
        "vllm/vllm-openai@sha256:0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9",
        "commit 9d60b570986f3639aa01bc23de45f6789abcdef0",
        "max_num_batched_tokens=8192, tokenizer='moonshotai/Kimi-K3', tokenizer_mode=auto",
        "non-default args: {'hf_token': None, 'api_key': None, 'hf_overrides': {}}",
        "hf_config_path=None skip_tokenizer_init=False",
        "secretName: gpu-operator-creds",
        "PWD=/home/ops",
        "The bearer token must be rotated",
        "ssh root@gpu01 https://example.com/path?x=1 http://10.0.0.1:8080/",
        "nvidia-driver-580=580.95.05-0ubuntu1 installed",
        "disk-abcdefghijklmnopqrstuvwxyz",
        "token: [REDACTED]",
        "--token\nnext-line-stays",
        "reading --token-file /etc/cockpit/token.txt",
        "JobCredentialPrivateKey = (null)",
    ],
)
def test_false_positives_left_untouched(text: str) -> None:
    assert redact(text) == text


def test_real_captured_outputs_pass_through_unchanged(fixtures_dir: Path) -> None:
    # runbooks/ holds runbooks written for tests, not captures (one plants a credential on purpose)
    written = fixtures_dir / "runbooks"
    files = [p for p in fixtures_dir.rglob("*") if p.is_file() and p.name != "README.md" and written not in p.parents]
    assert len(files) > 10
    files.append(NODE_DOCUMENT)  # the captured node document ships with the simulator
    for path in files:
        text = path.read_text(errors="replace")
        assert redact(text) == text, path.name


def test_redaction_is_idempotent_and_keeps_lines() -> None:
    text = "\n".join(
        [
            "Authorization: Bearer abcdef0123456789abcdef",
            f"HF_TOKEN={HF} next",
            "password: 'a b c'",
            "https://u:p4ss@h/x",
            "Driver Version: 580.173.02",
        ]
    )
    once = redact(text)
    assert redact(once) == once
    assert once.count("\n") == text.count("\n")
    assert once.splitlines()[-1] == "Driver Version: 580.173.02"


STREAM_TEXT = (
    "Step 1/3 pulling image\n"
    "Authorization: Bearer abcdef0123456789abcdef\n"
    f"export HF_TOKEN={HF}\n"
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn\nb3BlbnNzaC1rZXktdjEAAAAABG5v\n-----END RSA PRIVATE KEY-----\n"
    "Driver Version: 580.173.02\n"
    "password=hunter2 and no newline at the end"
)


def test_stream_redactor_holds_partial_lines_and_key_blocks() -> None:
    from cockpit.fleet.redact import StreamRedactor

    stream = StreamRedactor()
    assert stream.feed("Authorization: Bearer abcdef01") == ""  # a token must not leak in halves
    assert stream.feed("23456789abcdef\nnext") == f"Authorization: Bearer {REDACTED}\n"
    assert stream.feed("\n-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n") == "next\n"
    assert stream.feed("b3Blbn\n") == ""
    assert stream.feed("-----END EC PRIVATE KEY-----\nok\n") == (
        f"-----BEGIN EC PRIVATE KEY-----\n{REDACTED}\n-----END EC PRIVATE KEY-----\nok\n"
    )
    assert stream.flush() == ""


@given(st.lists(st.integers(min_value=1, max_value=len(STREAM_TEXT) - 1), max_size=12))
def test_stream_redaction_equals_whole_text_redaction(cuts: list[int]) -> None:
    from cockpit.fleet.redact import StreamRedactor

    bounds = [0, *sorted(set(cuts)), len(STREAM_TEXT)]
    stream = StreamRedactor()
    shown = "".join(stream.feed(STREAM_TEXT[a:b]) for a, b in itertools.pairwise(bounds))
    shown += stream.flush()
    assert shown == redact(STREAM_TEXT)
    assert "hunter2" not in shown and "MIIEpA" not in shown and HF not in shown


def test_stream_redactor_releases_an_overlong_line() -> None:
    from cockpit.fleet.redact import StreamRedactor

    stream = StreamRedactor(max_hold=100)
    assert stream.feed("x" * 150) == "x" * 150
