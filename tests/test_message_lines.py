"""``messages`` formats its records a batch at a time from their columns
(report/message_lines.py); the lines are those MessageView makes of each record as a
dict, byte for byte, on every crafted and real capture, with the other RDMA
protocols' messages kept (``--other``) and without, and on real captures cut by editcap
(to a snaplen, or from a frame on: mid-session).  So are export's ``messages`` rows."""

import json
import subprocess
from types import SimpleNamespace

import pyarrow as pa
import pytest

from conftest import PROJECT_PCAPS, REAL_NAMES, real_pcap
from rtrs_scapy.analysis import analyze
from rtrs_scapy.report.message_lines import MessageLines, fast
from rtrs_scapy.report.messages import MESSAGE_KINDS, OTHER, MessageView
from rtrs_scapy.tables.build import messages_tables

CAPTURES = sorted(str(p)[:-len(".truth.json")] for p in PROJECT_PCAPS.glob("*.truth.json")) \
    + [str(real_pcap(name)) for name in REAL_NAMES] \
    + ["errors cut to 96 bytes", "jumbo cut to 326 bytes", "multipath cut to 128 bytes",
       "failover from frame 22000", "load from frame 30001"]


@pytest.fixture
def capture_file(request, tmp_path):
    """The capture of the test's ``capture`` parameter: a file, or a real capture cut
    by editcap: as a snaplen cuts it (header-only requests), or from a frame on (a
    capture started mid-session, without handshakes; failover's at its failover, the
    load capture's under load)."""
    name = request.node.callspec.params["capture"]
    if " cut to " in name:
        real, snaplen = name.split(" cut to ")
        options, frames = ["-s", snaplen.split()[0]], []
    elif " from frame " in name:
        real, first = name.split(" from frame ")
        options, frames = ["-r"], ["%s-%d" % (first, 1 << 30)]
    else:
        return name
    cut = tmp_path / (real + ".pcap")
    subprocess.run(["editcap", "-F", "pcap"] + options + [str(real_pcap(real)), str(cut)]
                   + frames, check=True, capture_output=True)
    return str(cut)


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.rsplit("/", 1)[-1])
@pytest.mark.parametrize("kept", [True, MESSAGE_KINDS + (OTHER,)], ids=["rtrs", "other"])
def test_batches_are_the_lines_of_each_record(capture, capture_file, kept):
    result = analyze(capture_file, keep_messages=kept)
    view = MessageView(result.summary, result.messages)
    assert fast(view)
    lines = MessageLines(view, result.messages)
    records = list(view.select())
    for fmt, one in (("text", view.line), ("json", lambda r: json.dumps(view.as_json(r)))):
        written = b"".join(lines.serial(fmt)).decode().split("\n")
        assert written == [one(record) for record in records] + [""]


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.rsplit("/", 1)[-1])
def test_table_rows_are_those_of_each_record_dict(capture, capture_file):
    """export's ``messages`` table, made from the columns (tables/message_table.py),
    holds the rows build.py makes of each record as a dict."""
    result = analyze(capture_file, keep_messages=True)
    columnar = pa.concat_tables(messages_tables(result, "c"))
    as_dicts = SimpleNamespace(summary=result.summary, analyzer=result.analyzer,
                               messages=list(result.messages))
    assert columnar.equals(pa.concat_tables(messages_tables(as_dicts, "c")))
