"""Issue 28: the common shapes of credentials, as secret scanners (gitleaks' and
detect-secrets' rules: keyword assignments, basic-auth URLs and flags, HTTP credential
headers, vendor token prefixes, private key blocks) and the tools' own manuals give them.
Each row: the text, the secret that must be gone, and what must stay so the line still
says what happened. Fake secrets are assembled at run time so no scanner flags this file."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.fleet.redact import REDACTED, StreamRedactor, redact

PW = "hunter2" + "Zq9"
KEYDATA = "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb3dJQkFBS0NBUUVB"

SHAPES: list[tuple[str, str, str, str]] = [
    # (name, text, secret, kept)
    ("mysql -pPASS", f"mysql -u root -p{PW} -h db01 gpus", PW, "mysql -u root -p"),
    ("mysqldump -pPASS", f"mysqldump --single-transaction -uroot -p{PW} inventory > x.sql", PW, "> x.sql"),
    ("kubeconfig client-key-data", f"    client-key-data: {KEYDATA}", KEYDATA, "client-key-data: "),
    ("kubeconfig token", f"    token: {PW}", PW, "token: "),
    ("curl -u user:pass", f"curl -sk -u admin:{PW} https://bmc01/redfish/v1/Systems", PW, "-u admin:"),
    ("curl --user user:pass", f"curl --user admin:{PW} https://x", PW, "--user admin:"),
    ("wget --user= --password=", f"wget --user=bob --password={PW} https://x/f", PW, "--user=bob"),
    ("Cookie header", f"Cookie: session={PW}; theme=dark", PW, "Cookie: "),
    ("Set-Cookie header", f"< Set-Cookie: sid={PW}; Path=/; HttpOnly", PW, "< Set-Cookie: "),
    ("Authorization Bearer", f"Authorization: Bearer {PW}abcdefghijkl", PW, "Authorization: Bearer "),
    ("Authorization Basic", "authorization: Basic dXNlcjpodW50ZXIy", "dXNlcjpodW50ZXIy", "Basic "),
    ("X-Api-Key header", f"X-Api-Key: {PW}", PW, "X-Api-Key: "),
    ("AWS access key id", "AKIA" + "IOSFODNN7EXAMPLE in use", "AKIA" + "IOSFODNN7EXAMPLE", " in use"),
    ("AWS secret key", f"aws_secret_access_key = {PW}/K7MDENG", PW, "aws_secret_access_key = "),
    ("AWS session token env", f"AWS_SESSION_TOKEN={PW}//////", PW, "AWS_SESSION_TOKEN="),
    ("password= env", f"PGPASSWORD={PW} psql -h db", PW, "psql -h db"),
    ("_PASS env", f"export DB_PASS={PW}", PW, "export DB_PASS="),
    ("_PWD env", f"MYSQL_PWD={PW} mysql -u root", PW, "mysql -u root"),
    ("--password flag", f"mysql --password {PW} -h db", PW, "-h db"),
    ("--password= flag", f"helm repo add x https://x --password={PW}", PW, "--password="),
    ("sshpass -p", f"sshpass -p {PW} ssh root@gpu01 uptime", PW, "ssh root@gpu01 uptime"),
    ("ipmitool -P", f"ipmitool -I lanplus -H bmc01 -U admin -P {PW} chassis power status", PW, "chassis power"),
    ("redis-cli -a", f"redis-cli -h cache -a {PW} ping", PW, " ping"),
    ("docker login -p", f"docker login -u bob -p {PW} nvcr.io", PW, "nvcr.io"),
    ("ldapsearch -w", f"ldapsearch -x -D cn=admin -w {PW} -b dc=x", PW, "-b dc=x"),
    ("smbclient -U user%pass", f"smbclient //nas/share -U bob%{PW}", PW, "-U bob%"),
    ("URL user:pass@", f"git clone https://bob:{PW}@git.example.com/r.git", PW, "@git.example.com/r.git"),
    ("DSN user:pass@", f"DATABASE_URL=postgres://svc:{PW}@db:5432/x", PW, "@db:5432/x"),
    (".netrc", f"machine api.example login bob password {PW}", PW, "login bob password "),
    (
        "Azure AccountKey",
        f"DefaultEndpointsProtocol=https;AccountName=x;AccountKey={PW}==;EndpointSuffix=y",
        PW,
        ";EndpointSuffix=y",
    ),
    ("client_secret JSON", f'{{"client_secret": "{PW}", "id": 7}}', PW, '"id": 7'),
    ("GitHub token", "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", "A1b2C3d4E5f6", ""),
    ("GitLab token", "glpat-" + "x1Y2z3A4b5C6d7E8f9G0", "x1Y2z3A4b5C6d7E8f9G0", ""),
    ("Slack token", "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKl", "AbCdEfGhIjKl", ""),
    ("npm token", "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "a1B2c3D4e5F6", ""),
    ("Stripe key", "sk_live_" + "a1B2c3D4e5F6g7H8i9J0k1L2", "a1B2c3D4e5F6", ""),
    ("NGC key", "nvapi-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa", "Zx9Yw8Vu7Ts6", ""),
    (
        "OpenSSH private key",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAA",
        "-----END OPENSSH PRIVATE KEY-----",
    ),
    (
        "EC private key",
        "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIB\n-----END EC PRIVATE KEY-----",
        "MHcCAQEEIB",
        "BEGIN EC",
    ),
]


@pytest.mark.parametrize(("name", "text", "secret", "kept"), SHAPES, ids=[s[0] for s in SHAPES])
def test_each_common_secret_shape_is_masked(name: str, text: str, secret: str, kept: str) -> None:
    out = redact(text)
    assert secret not in out and REDACTED in out, out
    assert kept in out, out
    assert redact(out) == out  # masking twice changes nothing more
    # live output, a character at a time, masks the same
    stream = StreamRedactor()
    shown = "".join(stream.feed(ch) for ch in text + "\n") + stream.flush()
    assert shown == out + "\n"


@pytest.mark.parametrize(
    "text",
    [
        "mysql -u root -p gpus",  # a bare -p prompts: nothing to mask
        "mysql --version",
        "nvidia-smi -pm 1",
        "curl -u : https://x --negotiate",
        "cookie monster",
        "bypass=1",
        "PWD=/root",
        "redis-cli ping",
        "docker pull nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5",
    ],
)
def test_lookalikes_are_left_alone(text: str) -> None:
    assert redact(text) == text


async def test_each_shape_in_a_steps_output_stays_out_of_the_log_the_ticket_and_the_cast(tmp_path: Path) -> None:
    """A window step prints every shape above (a local command, really run): the change log,
    the ticket and the replay cast hold none of the secrets."""
    from repo_paths import REPO

    from cockpit.cli import main
    from cockpit.fleet.targets import HostTarget
    from cockpit.runbook.loader import load_runbook
    from cockpit.session.operator import Session

    printed = tmp_path / "shapes.txt"
    printed.write_text("\n".join(text for _, text, _, _ in SHAPES) + "\n")
    text = (REPO / "checklists" / "minimal-driver-upgrade.toml").read_text()
    step = f"""
  [[stages.steps]]
  id = "show-config"
  title = "Show the site's configuration"
  where = "local"
  run = "cat {printed}"
"""
    text = text.replace("arms_triggers = true\n", "arms_triggers = true\n" + step, 1)
    runbook = tmp_path / "shapes.toml"
    runbook.write_text(text)
    session = Session.start(
        sessions_dir=tmp_path / "sessions", change_id="CHG-SHAPES", loaded=load_runbook(runbook), params={},
        targets=[HostTarget(name="gpu01")], operator="alice", transport=None,
    )  # fmt: skip
    try:
        outcome = await session.steps.run_step("arm", "show-config")
        assert outcome.ok, outcome
    finally:
        session.journal.close()
    assert main(["export", str(session.path), "-o", str(tmp_path / "ticket.md")]) == 0
    assert main(["replay", str(session.path), "--cast", str(tmp_path / "w.cast")]) == 0
    places = {
        "log": session.path.read_text(),
        "ticket": (tmp_path / "ticket.md").read_text(),
        "cast": (tmp_path / "w.cast").read_text(),
    }
    assert REDACTED in places["log"]
    for name, _, secret, _ in SHAPES:
        for where, held in places.items():
            assert secret not in held, f"{name}: its secret is in the {where}"
