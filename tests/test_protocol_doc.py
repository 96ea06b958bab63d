"""docs/PROTOCOL.md, the project's protocol reference: its generated layout tables
are fresh and complete, its fixed headings exist, and every reference to it in the
repository resolves to one of its headings (GitHub anchor rules).  References to
documents the repository does not have are gone."""

import inspect
import re

import pytest
from click.testing import CliRunner
from scapy.packet import Packet

from conftest import REPO
from markdown_util import anchors, github_anchor
from rtrs_scapy.layout import doc as layout_doc
from rtrs_scapy.cli import main
from rtrs_scapy.layers import cm, ib, rnbd, rtrs, rtrs_request

DOC = REPO / "docs" / "PROTOCOL.md"

#: The headings every citation may rely on (the project's convention, fixed).
REQUIRED_ANCHORS = """
capture-encapsulations infiniband-transport base-transport-header
opcodes-and-extension-headers payload-pad-and-icrc psn-sequence-and-retransmissions
connection-management cm-mads cm-req cm-rep-rej-rtu-dreq-drep-and-mra
identifiers-comm-ids-qpns-and-starting-psns rdma-cm-service-id-and-ip-header rtrs-messages
constants conn_req conn_rsp info_req-and-info_rsp rkey_rsp request-trailers immediate-data
io_req-buf_id-and-offset io_rsp-and-io_rsp_w_inv heartbeats flows
sessions-paths-and-connections chunks-and-what-the-client-writes
which-operation-carries-what connect-reconnect-and-disconnect failover analysis-rules
pairing-requests-and-responses queue-depth-inference captures-that-start-mid-session
errors rnbd rnbd-messages the-rw-field rnbd-session-life-cycle kernel-versions
found-in-real-captures
""".split()

#: Layer classes without a generated table, and why.
NOT_TABULATED = {
    "IBPad": "0-3 pad bytes, described under payload-pad-and-icrc",
    "RtrsMsg": "dispatcher on the type field that info_req/info_rsp/rkey_rsp share",
    "RtrsWriteRequest": "a whole request (data, user header, trailer), described in prose",
    "RtrsReadRequest": "a whole request (user header, trailer), described in prose",
}

#: Where references may live (the repository's code, tests, tools and documents).
SCANNED_DIRS = ("rtrs_scapy", "tests", "scripts", "benchmarks", "wireshark", "docs")
SCANNED_SUFFIXES = {".py", ".lua", ".md", ".sh", ".json", ".cfg", ".toml", ".txt"}


def scanned_files():
    files = [REPO / "README.md"] + sorted((REPO / "pcaps").glob("**/*.md"))
    for top in SCANNED_DIRS:
        for path in sorted((REPO / top).rglob("*")):
            if path.is_file() and path.suffix in SCANNED_SUFFIXES \
                    and "__pycache__" not in path.parts:
                files.append(path)
    return files


DOC_TEXT = DOC.read_text(encoding="utf-8")
DOC_ANCHORS = set(anchors(DOC_TEXT))


def test_github_anchor_rules():
    assert github_anchor("io_req, buf_id and offset") == "io_req-buf_id-and-offset"
    assert github_anchor("CM REP, REJ, RTU, DREQ, DREP and MRA") == \
        "cm-rep-rej-rtu-dreq-drep-and-mra"
    assert github_anchor("Identifiers: comm IDs, QPNs and starting PSNs") == \
        "identifiers-comm-ids-qpns-and-starting-psns"
    assert github_anchor("The `rw` field") == "the-rw-field"
    assert anchors("# A\n```\n# not a heading\n```\n## A\n") == ["a", "a-1"]


def test_the_fixed_headings_exist_once():
    listed = anchors(DOC_TEXT)
    for anchor in REQUIRED_ANCHORS:
        assert listed.count(anchor) == 1, anchor


def test_layout_tables_are_fresh_and_complete():
    assert layout_doc.problems(DOC) == []


def test_docs_command_checks_and_rewrites_the_tables(tmp_path):
    stale = tmp_path / "PROTOCOL.md"
    stale.write_text(DOC_TEXT.replace("| `magic` |", "| `magick` |", 1), encoding="utf-8")
    runner = CliRunner()
    assert runner.invoke(main, ["docs", "--check", "--file", str(DOC)]).exit_code == 0
    result = runner.invoke(main, ["docs", "--check", "--file", str(stale)])
    assert result.exit_code == 1 and "stale" in result.output
    assert runner.invoke(main, ["docs", "--file", str(stale)]).exit_code == 0
    assert stale.read_text(encoding="utf-8") == DOC_TEXT


def test_every_layer_has_a_table():
    defined = set()
    for module in (ib, cm, rtrs, rnbd, rtrs_request):
        for name, cls in vars(module).items():
            if (inspect.isclass(cls) and issubclass(cls, Packet) and not name.startswith("_")
                    and cls.__module__ == module.__name__ and cls.fields_desc):
                defined.add(name)
    tabulated = set(layout_doc.CLASSES)
    assert defined - tabulated == set(NOT_TABULATED)
    assert {"BTH", "GRH", "AETH"} <= tabulated  # from scapy.contrib.roce, decoded here
    assert {name for kind, name in layout_doc.blocks(DOC_TEXT) if kind == "layout"} == tabulated


def test_a_generated_table_follows_the_layer():
    table = layout_doc.layout_table(rtrs.RtrsMsgConnReq)
    assert "| 44 | 1 bit | `first_conn` | bit 0 of u8 | 1 |" in table
    assert "| 2 | 2 | `magic` | u16 LE | 0x1bbd |" in table
    assert "56 bytes" in table


@pytest.mark.parametrize("path", scanned_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_references_resolve(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    cited = re.findall(r"docs/PROTOCOL\.md#([\w\-]+)", text)
    if path == DOC:
        cited += re.findall(r"\]\(#([^)\s]+)\)", text)
    unknown = sorted(set(cited) - DOC_ANCHORS)
    assert not unknown, "%s cites headings docs/PROTOCOL.md does not have: %s" % (
        path.relative_to(REPO), unknown)


#: Citations by section number and documents the repository does not have.
FORBIDDEN = (
    ("a section-number citation", re.compile("\u00a7")),
    ("a style guide outside the repository", re.compile("STYLE" + r"\.md")),
    ("an ecosystem note outside the repository", re.compile("ECOSYSTEM" + r"\.md")),
    ("a path outside the repository", re.compile(r"\.\./" + "shared")),
    ("an issue number", re.compile(r"\bissues? +#?\d+", re.I)),
    ("the protocol reference without its path", re.compile(r"(?<!docs/)(?<!\")\bPROTOCOL\.md")),
)


@pytest.mark.parametrize("path", scanned_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_no_reference_outside_the_repository(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    for what, pattern in FORBIDDEN:
        match = pattern.search(text)
        assert match is None, "%s: %s at line %d: %r" % (
            path.relative_to(REPO), what, text.count("\n", 0, match.start()) + 1,
            text[max(0, match.start() - 30):match.end() + 30])
