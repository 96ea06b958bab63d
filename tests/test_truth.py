"""The analyzer's summary against what really happened (truth.json of each real
capture: the workload's IO list and the kernel's own rtrs-client counters).

The kernel's counters of every path of every real capture (the client's sysfs
``stats/rdma``, ``stats/reconnects``, read out by the recording script, in
``rtrs_stats``): ``rtrs_clt_update_all_stats()`` (rtrs-clt-stats.c) counts each request
on the path it is posted to, once per post (a failed-over request again on its new
path), with ``usr_len + data_len`` bytes, before ``rtrs_clt_write_req()`` /
``rtrs_clt_read_req()`` post it; ``failover_cnt`` counts the requests moved onto the path
(``rtrs_clt_failover_req()``), ``reconnects`` the successful and failed reconnects.
"""

import pytest

from conftest import REAL_ALL
from rtrs_scapy.analysis import analyze

#: sizeof(struct rnbd_msg_close) (rnbd-proto.h: the 4-byte header and device_id): the
#: user header of the RTRS WRITE, without data, that each unmap sends
RNBD_CLOSE_BYTES = 8


@pytest.fixture
def analysis(real_capture):
    pcap, truth = real_capture
    return analyze(pcap, keep_messages=True), truth


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


def kernel_paths(truth):
    """{(session, client, server): the client's stats of the path at the last read-out
    that shows it} (a path removed before the end is last read out before its removal)."""
    found = {}
    for readout in truth["rtrs_stats"]["client"].values():
        for key, stats in readout.items():
            sessname, addresses = key.split("/", 1)
            client, server = (a.split(":", 1)[1] for a in addresses.split("@"))
            found[(sessname, client, server)] = stats
    return found


def never_on_the_wire(truth):
    """Requests the kernel counted that the capture does not hold, as the recording
    counted them: on failover, requests posted on the path whose NIC was down (12,053
    counted + 1 CLOSE, 12,050 IO_REQ immediates on the wire); 0 where its check held."""
    checks = truth["checks"]
    if checks["io_req_matches_stats_plus_unmaps"] is not False:
        return 0
    return checks["client_stats_requests"] + checks["unmaps"] - checks["pcap_io_req"]


@pytest.mark.parametrize("name,pcap,truth", REAL_ALL, ids=[name for name, _, _ in REAL_ALL])
def test_every_paths_kernel_counters(name, pcap, truth):
    """Requests and bytes read and written, reconnects (successful, failed) and
    failovers of each path equal the kernel's counters.  The last read-out precedes the
    unmaps: the RNBD CLOSE each unmap sends is in the capture, not in the counters.  The
    requests the kernel counted but never sent (``never_on_the_wire``) are all that the
    counts miss; where none is missing, the bytes are exact too."""
    result = analyze(pcap, keep_messages=("write",))
    closes = [m for m in result.messages if m["rnbd"] and m["rnbd"]["msg"] == "close"]
    assert len(closes) == len(truth["unmaps"])
    assert all(m["fields"]["data_len"] == 0 and m["fields"]["usr_len"] == RNBD_CLOSE_BYTES
               for m in closes)
    found = {(s["sessname"], p["client"], p["server"]): p
             for s in result.summary["sessions"] for p in s["paths"]}
    kernel = kernel_paths(truth)
    assert kernel
    unsent = 0
    for key, stats in kernel.items():
        path, rdma = found[key], stats["rdma"]
        closed = sum(1 for m in closes if (m["client"], m["server"]) == key[1:])
        counted = {"read": (rdma["reads"], rdma["read_bytes"]),
                   "write": (rdma["writes"] + closed,
                             rdma["write_bytes"] + closed * RNBD_CLOSE_BYTES)}
        for op, (count, size) in counted.items():
            missing = count - path["io"][op]["count"]
            unsent += missing
            shown = path["io"][op]["bytes"]
            assert missing >= 0 and shown <= size and (shown == size) is (missing == 0), \
                (key, op, count, size, path["io"][op])
        assert (path["reconnects"], path["reconnect_attempts"] - path["reconnects"],
                path["failovers"]) == (stats["reconnects"]["successful"],
                                       stats["reconnects"]["failed"], rdma["failover_cnt"]), key
    assert unsent == never_on_the_wire(truth)


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
        assert rsp["msg"] == "io_rsp"   # an RKEY_RSP is a field of it (records.response)
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
