"""A capture cut to start mid-session (no CM handshake, no info exchange)
still yields the path and the IO of the remaining part, queue depth inferred
(docs/PROTOCOL.md#captures-that-start-mid-session)."""


import pytest

from rtrs_scapy.analysis import analyze
from rtrs_scapy.capture import open_capture
from rtrs_scapy.craft import write_capture


def cut(src, dst, first_frame):
    """Copy frames first_frame.. of src to dst; returns the number of frames kept."""
    with open_capture(src) as cap:
        frames = [(ts, bytes(buf[s:e])) for no, ts, buf, s, e, _ in cap if no >= first_frame]
        link_type = cap.link_type
    write_capture(dst, frames, link_type)
    return len(frames)


@pytest.mark.parametrize("cut_after", ["handshake", "mid_message"])
def test_cut_capture_keeps_the_remaining_io(real_capture, tmp_path, cut_after):
    pcap, truth = real_capture
    full = analyze(pcap, keep_messages=True)
    info_rsp = next(m for m in full.messages if m["msg"] == "info_rsp")
    first = info_rsp["frame"] + 1
    if cut_after == "mid_message":
        # start inside the first multi-packet write: its FIRST packet is lost
        first = next(m["fields"]["first_frame"] for m in full.messages
                     if m["msg"] == "write" and m["fields"]["first_frame"] < m["frame"]) + 1
    # the kernel counted every request whose immediate is in the remaining frames,
    # also the one whose first packets were cut away
    expected = {"read": [0, 0], "write": [0, 0]}
    for m in full.messages:
        if m["msg"] in expected and m["frame"] >= first:
            expected[m["msg"]][0] += 1
            expected[m["msg"]][1] += m["fields"]["data_len"] + m["fields"]["usr_len"]
    assert expected["read"][0] and expected["write"][0]
    cut_through = sum(1 for m in full.messages if m["msg"] in expected
                      and m["fields"]["first_frame"] < first <= m["frame"])

    short = tmp_path / "cut.pcap"
    cut(pcap, short, first)
    result = analyze(short, keep_messages=True)
    (session,) = result.summary["sessions"]
    (path,) = session["paths"]
    assert path["sess_uuid"] is None and session["paths_uuid"] is None
    assert path["queue_depth_inferred"] is True
    assert path["queue_depth_source"] == "inferred"
    assert path["partial_requests"] == cut_through == (cut_after == "mid_message")
    # the captures use buf_ids 0 and 1: an odd buf_id pins mem_bits (qd 512 -> 19)
    assert path["queue_depth"] == truth["config"]["server_module_params"]["sess_queue_depth"]
    assert path["client"] in truth["config"]["client_ip"]
    assert path["server"] in truth["config"]["server_ip"]
    for op in ("read", "write"):
        assert [path["io"][op]["count"], path["io"][op]["bytes"]] == expected[op]
    assert path["always_invalidate"] is truth["config"]["always_invalidate"]
    hb = path["heartbeats"]
    assert hb["client_to_server"] and hb["server_to_client"]
    # every request of the remaining part is paired with its response
    requests = [m for m in result.messages if m["msg"] in ("read", "write")]
    assert all(m["paired_frame"] for m in requests)
    assert result.summary["anomalies"] == []


def test_forced_queue_depth_is_not_marked_inferred(real_capture, tmp_path):
    pcap, _ = real_capture
    full = analyze(pcap, keep_messages=True)
    first = next(m for m in full.messages if m["msg"] == "info_rsp")["frame"] + 1
    short = tmp_path / "cut.pcap"
    cut(pcap, short, first)
    result = analyze(short, queue_depth=512)
    (path,) = result.summary["sessions"][0]["paths"]
    assert path["queue_depth"] == 512 and path["queue_depth_inferred"] is False
    assert path["queue_depth_source"] == "forced"
