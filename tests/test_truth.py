"""The analyzer's summary against what really happened (truth.json of each real
capture: the workload's IO list and the kernel's own rtrs-client counters)."""

import pytest

from rtrs_scapy.analysis import analyze


@pytest.fixture
def analysis(real_capture):
    pcap, truth = real_capture
    return analyze(pcap, keep_messages=True), truth


def last_client_stats(truth):
    """The kernel's stats/rdma at the last read-out before the unmap ('pre_unmap')."""
    readouts = truth["rtrs_stats"]["client"]
    (stats,) = readouts["pre_unmap"].values()
    return stats["rdma"]


def test_session_parameters_match_the_config(analysis):
    result, truth = analysis
    config = truth["config"]
    (session,) = result.summary["sessions"]
    assert session["sessname"] == config["session"]
    assert len(session["paths"]) == config["paths"]
    for path in session["paths"]:
        assert path["queue_depth"] == config["server_module_params"]["sess_queue_depth"]
        assert path["queue_depth_inferred"] is False
        assert path["always_invalidate"] is config["always_invalidate"]
        assert path["port"] == config["rtrs_port"]
        assert path["client"] in config["client_ip"] and path["server"] in config["server_ip"]
        assert len({c["cid"] for c in path["connections"]}) == config["rtrs_connections_per_path"]
        assert path["max_io_size"] + path["max_hdr_size"] == \
            config["server_module_params"]["max_chunk_size"]


def test_io_counts_and_bytes_equal_the_kernel_counters(analysis):
    """Counters were read before the unmap; the RNBD CLOSE of each unmap (an RTRS
    WRITE of 8 header bytes, no data) is in the capture but not in them."""
    result, truth = analysis
    stats = last_client_stats(truth)
    closes = [m for m in result.messages if m["rnbd"] and m["rnbd"]["msg"] == "close"]
    assert len(closes) == len(truth["unmaps"])
    assert all(m["msg"] == "write" and m["fields"]["data_len"] == 0 for m in closes)
    close_bytes = sum(m["fields"]["usr_len"] for m in closes)
    (path,) = result.summary["sessions"][0]["paths"]
    assert path["io"]["read"]["count"] == stats["reads"]
    assert path["io"]["read"]["bytes"] == stats["read_bytes"]
    assert path["io"]["write"]["count"] == stats["writes"] + len(closes)
    assert path["io"]["write"]["bytes"] == stats["write_bytes"] + close_bytes
    assert path["io"]["read"]["errors"] == path["io"]["write"]["errors"] == 0


def test_every_workload_io_appears_as_an_rnbd_io(analysis):
    result, truth = analysis
    seen = {}
    for m in result.messages:
        rnbd = m["rnbd"]
        if rnbd and rnbd["msg"] == "io":
            op = {"RNBD_OP_READ": "read", "RNBD_OP_WRITE": "write"}.get(
                "RNBD_OP_" + rnbd["rw_str"].split("|")[0])
            key = (op, rnbd["sector"] * 512, rnbd["bi_size"])
            seen[key] = seen.get(key, 0) + 1
            # RNBD read = RTRS READ, write = RTRS WRITE (docs/PROTOCOL.md#the-rw-field)
            assert m["msg"] == op
    for io in truth["ios"]:
        for part in io["rtrs_requests_expected"]:
            key = (io["op"], part["off"], part["size"])
            assert seen.get(key), "IO %s not found as an RNBD IO" % (key,)
            seen[key] -= 1


def test_every_request_is_answered_and_paired_both_ways(analysis):
    result, _ = analysis
    by_frame = {m["frame"]: m for m in result.messages}
    requests = [m for m in result.messages if m["msg"] in ("read", "write")]
    assert requests
    for req in requests:
        rsp = by_frame[req["paired_frame"]]
        assert rsp["msg"] in ("io_rsp", "rkey_rsp")
        assert rsp["paired_frame"] == req["frame"]
        assert rsp["fields"]["msg_id"] == req["fields"]["buf_id"]
        assert rsp["latency"] == req["latency"] > 0


def test_heartbeats_rkeys_and_no_anomalies(analysis):
    result, truth = analysis
    counts = truth["checks"]["pcap_rtrs_counts"]
    (path,) = result.summary["sessions"][0]["paths"]
    hb = path["heartbeats"]
    assert hb["client_to_server"] + hb["server_to_client"] == counts["HB_MSG"]
    assert hb["acks_client_to_server"] + hb["acks_server_to_client"] == counts["HB_ACK"]
    assert path["rkey_refreshes"] == counts.get("RKEY_RSP", 0)
    assert result.summary["anomalies"] == []
    assert result.summary["capture"]["rtrs_packets"] == truth["pcap_stats"]["rocev2_frames"]
    assert path["devices"] == {"0": truth["maps"][0]["opts"].split("device_path=")[1]}
    # unmap on the client: the client sends the DREQs (frames 1553-1555 of basic_inval)
    assert [d["initiator"] for d in path["disconnects"]] == ["client"]
