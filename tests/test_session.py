"""The Scapy session class shares the analyzer: same summary, annotated packets,
multi-packet messages reassembled and decoded with the Scapy layers."""

from scapy.sendrecv import sniff

import rtrs_scapy as R
from rtrs_scapy.analysis import analyze
from rtrs_scapy.analysis.session import RtrsSession


def test_session_matches_the_cli_analyzer(real_capture):
    pcap, truth = real_capture
    session = RtrsSession()
    packets = sniff(offline=str(pcap), session=lambda: session, quiet=True)
    assert len(packets) == truth["pcap_stats"]["frames"]
    assert session.summary()["sessions"] == analyze(pcap).summary["sessions"]

    writes = [p for p in packets if isinstance(getattr(p, "rtrs_message", None),
                                               R.RtrsWriteRequest)]
    assert writes, "multi-packet 4 KiB writes are reassembled"
    for pkt in writes:
        (record,) = [r for r in pkt.rtrs if r["msg"] == "write"]
        request = pkt.rtrs_message
        assert isinstance(request.usr, R.RnbdMsgIo)
        assert request.usr.sector == record["rnbd"]["sector"]
        assert len(request.data) == record["fields"]["data_len"]
        assert request.imm_offset == record["fields"]["offset"] == pkt[R.ImmDt].decoded().offset
    assert pkt[R.ImmDt].queue_depth == truth["config"]["server_module_params"]["sess_queue_depth"]
