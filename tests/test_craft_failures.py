"""The crafted failure sequences on the wire, read back with the Scapy layers (not
the analyzer): what the kernel's CM and RTRS timers put there.

* a reconnect whose REP never reaches the client: the same REQ (comm ID, TID) every
  ~6 s, the server's REP again for each, then after 30 s (RTRS_CONNECT_TIMEOUT_MS) a
  client REJ with reason Timeout, message "other", the client's CA GUID as additional
  reject information and no private data (cm.c: ib_destroy_cm_id() in REQ_SENT);
  the next attempt 31 s later (reconnect_delay_sec + RTRS_RECONNECT_BACKOFF);
* the server's heartbeat timer: DREQs 6 intervals after its last heartbeat
  (hb_work(): more than RTRS_HB_MISSED_MAX ticks), sent again with the same IDs;
* crossed DREQs at unmap: the server's own DREQs on cids 1.. with its own comm IDs;
* the unmap of Linux 6.12 (unmap_6_12): the server's DREP, then its own DREQs; 6.1's
  usual one (basic): DREPs only;
* answers into a dead link (failover_undelivered): sent again with their PSNs and never
  acknowledged, then the requests re-sent on the other path with their buf_ids and RNBD
  headers in buf_id order, the one sent after the link died among them.
"""

import collections

from rtrs_scapy.spec.constants import HEARTBEAT_INTERVAL_S, RTRS_HB_MISSED_MAX, RTRS_HB_MSG_IMM
from rtrs_scapy.craft import craft_scenario
from rtrs_scapy.spec.imm import decode as decode_imm
from rtrs_scapy.layers.cm import (
    MAD, CMDrep, CMDreq, CMRej, CMRep, CMReq, cm_rej_reasons, msg_kinds,
)
from rtrs_scapy.layers.ib import ImmDt
from rtrs_scapy.layers.rtrs import RtrsMsgConnReq, RtrsMsgConnRsp

REJ_TIMEOUT = {name: code for code, name in cm_rej_reasons.items()}["Timeout"]


def _ip(pkt):
    return pkt["IP"].src


def test_reconnect_whose_rep_never_arrives():
    packets, truth = craft_scenario("reconnect_timeout", seed=3)
    client = truth["paths"][1]["client_addr"]
    reqs = [p for p in packets if RtrsMsgConnReq in p and p[RtrsMsgConnReq].recon_cnt > 1]
    by_attempt = collections.defaultdict(list)
    for p in reqs:
        by_attempt[p[RtrsMsgConnReq].recon_cnt].append(p)
    assert sorted(by_attempt) == [2, 3]
    rejs = [p for p in packets if CMRej in p and _ip(p) == client]
    assert len(rejs) == 2
    for attempt, rej in zip(sorted(by_attempt), rejs):
        sent = by_attempt[attempt]
        assert {p[CMReq].local_comm_id for p in sent} == {sent[0][CMReq].local_comm_id}
        assert {p[MAD].transaction_id for p in sent} == {sent[0][MAD].transaction_id}
        assert {p[RtrsMsgConnReq].cid for p in sent} == {0}  # the attempt never got further
        times = [float(p.time) for p in sent]
        gaps = [b - a for a, b in zip(times, times[1:])]
        assert len(sent) == 5 and all(5.9 < g < 6.2 for g in gaps)
        reps = [p for p in packets if CMRep in p
                and p[CMRep].remote_comm_id == sent[0][CMReq].local_comm_id]
        assert len(reps) == len(sent)
        assert len({bytes(p[CMRep]) for p in reps}) == 1
        r = rej[CMRej]
        assert (r.reason, msg_kinds[r.message_rejected], r.remote_comm_id) == \
            (REJ_TIMEOUT, "other", 0)
        assert r.local_comm_id == sent[0][CMReq].local_comm_id
        assert r.additional_reject_information[:r.reject_info_length] == \
            sent[0][CMReq].local_ca_guid.to_bytes(8, "big")
        assert RtrsMsgConnRsp not in rej
        assert 30.0 <= float(rej.time) - times[0] < 30.1
    first, second = (float(p.time) for p in rejs)
    assert 60.9 < second - first < 61.2
    assert truth["paths"][1]["kernel"]["reconnects"] == {"successful": 0, "failed": 2}


def test_server_heartbeat_timer():
    packets, truth = craft_scenario("server_hb_loss", seed=3)
    server = truth["paths"][0]["server_addr"]
    beats = [p for p in packets if ImmDt in p and _ip(p) == server
             and decode_imm(p[ImmDt].imm).type == RTRS_HB_MSG_IMM]
    dreqs = [p for p in packets if CMDreq in p]
    assert dreqs and {_ip(p) for p in dreqs} == {server}
    timeout = HEARTBEAT_INTERVAL_S * (RTRS_HB_MISSED_MAX + 1)
    silence = float(dreqs[0].time) - float(beats[-1].time)
    assert timeout <= silence < timeout * 1.05
    sent = collections.Counter((p[CMDreq].local_comm_id, p[MAD].transaction_id) for p in dreqs)
    assert len(sent) == truth["config"]["cid_num"] and min(sent.values()) > 1
    assert truth["paths"][0]["heartbeat_lost"] == 1


def test_crossed_dreqs_at_unmap():
    packets, truth = craft_scenario("reconnect_third_try", seed=3)
    path = truth["paths"][0]
    last = max(p[RtrsMsgConnReq].recon_cnt for p in packets if RtrsMsgConnReq in p)
    conns = {p[CMReq].local_comm_id: p[RtrsMsgConnReq].cid for p in packets
             if RtrsMsgConnReq in p and p[RtrsMsgConnReq].recon_cnt == last}
    server_ids = {p[CMRep].local_comm_id: conns[p[CMRep].remote_comm_id] for p in packets
                  if CMRep in p and p[CMRep].remote_comm_id in conns}
    dreqs = [p for p in packets if CMDreq in p and float(p.time) > float(packets[-1].time) - 1]
    by_side = collections.defaultdict(set)
    for p in dreqs:
        side = "client" if _ip(p) == path["client_addr"] else "server"
        ids = conns if side == "client" else server_ids
        by_side[side].add(ids[p[CMDreq].local_comm_id])
    assert by_side == {"client": {0, 1, 2}, "server": {1, 2}}
    server_tids = {p[MAD].transaction_id for p in dreqs if _ip(p) == path["server_addr"]}
    assert not server_tids & {p[MAD].transaction_id for p in packets if CMReq in p}
    # the server's DREQs answer the client's (after its DREP): one disconnect
    assert path["disconnects"][-1] == {"initiator": "client", "crossed": False,
                                       "answered_by": "server"}
    assert path["kernel"]["reconnects"] == {"successful": 1, "failed": 2}
    assert path["lost_requests"] == truth["params"]["in_flight"]


def test_answers_into_a_dead_link_and_their_copies():
    """failover_undelivered, read back with the Scapy layers: the server's answers on
    path 1 after the client's link died are retransmitted (the same PSN again); the client re-sends those requests on path 0 with the same
    buf_id and RNBD header, in buf_id order, with the request it sent into the dead link
    (not on the wire) between them; the analyzer counts them as the truth says."""
    from rtrs_scapy.analysis import analyze
    from rtrs_scapy.craft import write_capture
    from rtrs_scapy.layers.ib import BTH
    from rtrs_scapy.layers.rnbd import RnbdMsgIo
    import tempfile
    packets, truth = craft_scenario("failover_undelivered", seed=24)
    p0, p1 = (p["client_addr"] for p in truth["paths"])
    moved = [io for io in truth["ios"] if io["failover"]]
    originals = {io["buf_id"]: io for io in truth["ios"]       # the last before the copies
                 if io["path"] == 1 and io["buf_id"] in {m["buf_id"] for m in moved}
                 and io["t"] < moved[0]["t"]}
    assert [m["buf_id"] for m in moved] == sorted(m["buf_id"] for m in moved)
    qd, when = truth["config"]["queue_depth"], moved[0]["t"] - 1e-5   # (t is rounded)
    # buf_id -> RNBD IO header: path 1's last before, path 0's first after (of the
    # one-packet requests, reads: a multi-packet write's header is in its last packet)
    before, after, on_path1 = {}, {}, set()
    answers, seen = {}, collections.Counter()
    for pkt in packets:
        if ImmDt not in pkt:
            continue
        imm = decode_imm(pkt[ImmDt].imm, qd)
        if RnbdMsgIo in pkt:
            header = bytes(pkt[RnbdMsgIo])
            if _ip(pkt) == p1:
                on_path1.add(header)
            if _ip(pkt) == p1 and pkt.time < when:
                before[imm.buf_id] = header
            elif _ip(pkt) == p0 and pkt.time >= when:
                after.setdefault(imm.buf_id, header)
        elif imm.msg_id is not None and pkt["IP"].dst == p1:
            seen[(pkt[BTH].dqpn, pkt[BTH].psn)] += 1
            answers[(pkt[BTH].dqpn, pkt[BTH].psn)] = imm.msg_id
    again = {answers[k] for k, n in seen.items() if n > 1}
    answered = {b for b, io in originals.items() if io["errno"] is not None}
    assert again == answered and len(answered) == 2
    reads = [b for b in answered if originals[b]["dir"] == "read"]
    assert reads and all(after[b] == before[b] for b in reads)
    (unsent,) = set(originals) - answered
    assert originals[unsent]["dir"] == "read" and after[unsent] not in on_path1
    assert truth["executed_twice"] == sum(1 for b in answered if originals[b]["dir"] == "write")
    with tempfile.TemporaryDirectory() as tmp:
        write_capture(tmp + "/f.pcap", packets)
        summary = analyze(tmp + "/f.pcap").summary
    (session,) = summary["sessions"]
    taker = {p["client"]: p for p in session["paths"]}[p0]
    assert sorted((f["buf_id"], f["kind"]) for f in taker["failover_list"]) == sorted(
        (b, "response_not_delivered" if b in answered else "original_not_on_wire")
        for b in originals)
    assert session["rnbd"]["failovers"]["executed_twice"] == truth["executed_twice"] == 1


def test_unmap_of_linux_6_12_and_6_1():
    """unmap_6_12: the server's DREP of cid 0 comes before its own DREQs for the other
    cids; basic (Linux 6.1's usual unmap): DREQs of the client only, a DREP for each.
    Both are one disconnect started by the client (the generator's truth)."""
    for scenario, server_dreqs in (("unmap_6_12", True), ("basic", False)):
        packets, truth = craft_scenario(scenario, seed=5)
        (path,) = truth["paths"]
        cm = [("client" if _ip(p) == path["client_addr"] else "server",
               "DREQ" if CMDreq in p else "DREP") for p in packets
              if CMDreq in p or CMDrep in p]
        server = [kind for side, kind in cm if side == "server"]
        assert server[0] == "DREP"
        assert ("DREQ" in server) is server_dreqs
        assert cm[0] == ("client", "DREQ")
        assert [(d["initiator"], d["answered_by"]) for d in path["disconnects"]] == \
            [("client", "server" if server_dreqs else None)]
