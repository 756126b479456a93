"""The ssh_config index gives each host exactly the lines asyncssh's own Host matching
would apply, in file order, whether a block names hosts plainly or by pattern."""

from __future__ import annotations

from pathlib import Path

from asyncssh.pattern import WildcardPatternList
from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.fleet.sshconfig import SshConfigIndex

NAMES = ["gpu01", "gpu02", "GPU01", "gpu1", "ctl", "gpu01.example"]
PATTERNS = [*NAMES, "gpu*", "!gpu02", "gpu0?", "*", "gpu[01]1", "ctl,gpu02"]


def naive(text: str, host: str) -> list[str]:
    """Every Host block tried in order with asyncssh's matcher (what the index replaces)."""
    out: list[str] = []
    keep = True
    for line in text.splitlines():
        if line.startswith("Host "):
            keep = WildcardPatternList(",".join(line[5:].split())).matches(host)
        if keep:
            out.append(line)
    return out


@settings(max_examples=60, deadline=None)
@given(
    blocks=st.lists(st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=3), max_size=8),
    host=st.sampled_from(NAMES),
)
def test_each_host_gets_the_blocks_asyncssh_would_match_in_file_order(
    tmp_path_factory, blocks: list[list[str]], host: str
) -> None:
    text = "User ops\n" + "".join(
        f"Host {' '.join(patterns)}\n    Port {2200 + n}\n" for n, patterns in enumerate(blocks)
    )
    path = Path(tmp_path_factory.mktemp("cfg")) / "ssh_config"
    path.write_text(text)
    index = SshConfigIndex([str(path)])
    try:
        (written,) = index.paths_for(host)
        got = [line.strip() for line in Path(written).read_text().splitlines() if not line.startswith("#")]
        assert got == [line.strip() for line in naive(text, host)]
    finally:
        index.cleanup()
