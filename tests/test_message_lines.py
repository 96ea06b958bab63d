"""``messages`` formats its records a batch at a time from their columns
(report/message_lines.py); the lines are those MessageView makes of each record as a
dict, byte for byte, on every crafted and real capture, with the other RDMA
protocols' messages kept (``--other``) and without."""

import json

import pytest

from conftest import PROJECT_PCAPS, REAL_NAMES, real_pcap
from rtrs_scapy.analysis import analyze
from rtrs_scapy.report.message_lines import MessageLines, fast
from rtrs_scapy.report.messages import MESSAGE_KINDS, OTHER, MessageView

CAPTURES = sorted(str(p)[:-len(".truth.json")] for p in PROJECT_PCAPS.glob("*.truth.json")) \
    + [str(real_pcap(name)) for name in REAL_NAMES]


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.rsplit("/", 1)[-1])
@pytest.mark.parametrize("kept", [True, MESSAGE_KINDS + (OTHER,)], ids=["rtrs", "other"])
def test_batches_are_the_lines_of_each_record(capture, kept):
    result = analyze(capture, keep_messages=kept)
    view = MessageView(result.summary, result.messages)
    assert fast(view)
    lines = MessageLines(view, result.messages)
    records = list(view.select())
    for fmt, one in (("text", view.line), ("json", lambda r: json.dumps(view.as_json(r)))):
        written = b"".join(lines.serial(fmt)).decode().split("\n")
        assert written == [one(record) for record in records] + [""]
