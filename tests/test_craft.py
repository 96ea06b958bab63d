"""The crafter against the real kernel captures (pcaps/real/), and every
scenario through the Scapy layers with conf.debug_dissector on.

Comparison rule: a session crafted with the workload of a capture's truth.json
(``craft_from_truth``) must have the same multiset of (opcode, IB payload
length) per direction as the real capture.  ACKs are included: Soft-RoCE asks
for an ACK on every message's last packet and on the 66th non-final packet
since the last request (RXE_MAX_PKT_PER_ACK), and the responder ACKs each of
them — the captures show no coalescing (every AckReq PSN has its own ACK), so
no ACK needs to be ignored.  Timing-dependent things (how many heartbeats) agree
because the crafted session lasts about as long (2 heartbeat rounds).
"""

import collections
import importlib.util
import json

import pytest
from click.testing import CliRunner
from scapy.config import conf
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether
from scapy.utils import RawPcapReader, rdpcap

from rtrs_scapy.analysis import analyze
from rtrs_scapy.craft import craft_scenario, read_capture, scenario_names, write_capture
from rtrs_scapy.craft.repeat import repeat_capture, session_uuids
from rtrs_scapy.craft.scenarios import craft_frames, craft_from_truth
from rtrs_scapy.cli.craft import craft
from rtrs_scapy.spec.imm import decode as decode_imm
from rtrs_scapy.layers.cm import CMRej, CMRep, CMReq, MAD
from rtrs_scapy.layers.ib import (
    AETH, BTH, DETH, IETH, LRH, RETH, ImmDt, header_chain, icrc_ok,
)
from rtrs_scapy.layers.rnbd import RnbdMsgHdr, RnbdMsgIo
from rtrs_scapy.layers.rtrs import RtrsMsgConnReq, RtrsMsgConnRsp, RtrsMsgRkeyRsp
from rtrs_scapy.layers.rtrs_request import split_read, split_write

from conftest import PROJECT_PCAPS, REAL, REPO, real_pcap

EXT_SIZE = {RETH: 16, ImmDt: 4, IETH: 4, DETH: 8, AETH: 4}
MEM_BITS = 19  # queue depth 512


def payload_len(bth):
    body = len(bytes(bth)) - 12 - 4  # BTH and ICRC
    return body - sum(EXT_SIZE[h] for h in header_chain(bth.opcode)) - bth.padcount


def ib_payload(pkt):
    bth = pkt[BTH]
    data = bytes(bth)[12 + sum(EXT_SIZE[h] for h in header_chain(bth.opcode)):-4]
    return data[:len(data) - bth.padcount]


def client_ip(pkts):
    return next(p["IP"].src for p in pkts if CMReq in p)


def shape(pkts):
    cip = client_ip(pkts)
    out = collections.Counter()
    for p in pkts:
        direction = "C>S" if p["IP"].src == cip else "S>C"
        out[(direction, p[BTH].opcode, payload_len(p[BTH]))] += 1
    return out


def messages(pkts):
    """Whole RC messages per (sender, QP): [(opcodes, first packet, last packet, bytes)]."""
    cip = client_ip(pkts)
    partial, out = {}, []
    for p in pkts:
        bth = p[BTH]
        if bth.opcode in (0x11, 0x64):
            continue
        key = (p["IP"].src == cip, bth.dqpn)
        if bth.opcode in (0x00, 0x06):
            partial[key] = [p, b""]
        entry = partial.get(key) if bth.opcode in (0x00, 0x01, 0x02, 0x06, 0x07, 0x08, 0x09) \
            else [p, b""]
        if entry is None:
            continue
        entry[1] += ib_payload(p)
        if bth.opcode not in (0x00, 0x01, 0x06, 0x07):
            out.append((key[0], entry[0], p, entry[1]))
            partial.pop(key, None)
    return out


def field_profile(pkts):
    """Everything that is not random, as multisets (see module doc)."""
    prof = collections.defaultdict(collections.Counter)
    skip_req = {"local_comm_id", "local_ca_guid", "local_qpn", "starting_psn",
                "primary_local_port_gid", "primary_remote_port_gid", "primary_flow_label"}
    for p in pkts:
        if CMReq in p:
            prof["cm_req"][tuple(sorted((k, v) for k, v in p[CMReq].fields.items()
                                        if k not in skip_req))] += 1
            req = p[RtrsMsgConnReq]
            prof["conn_req"][(req.magic, req.version, req.cid, req.cid_num, req.recon_cnt,
                              req.first_conn, bytes(req.reserved))] += 1
        if CMRep in p:
            rep = p[CMRep]
            prof["cm_rep"][(rep.target_ack_delay, rep.rnr_retry_count, rep.failover_accepted,
                            rep.responder_resources, rep.initiator_depth)] += 1
            prof["conn_rsp"][bytes(p[RtrsMsgConnRsp])] += 1
        if MAD in p:
            mad = p[MAD]
            prof["mad"][(mad.base_version, mad.mgmt_class, mad.class_version, mad.method,
                         mad.attribute_id, len(bytes(mad)))] += 1
        if ImmDt in p:
            imm = decode_imm(p[ImmDt].imm, 512)
            if imm.type == 0:
                prof["io_req_imm_offset"][imm.offset] += 1
            else:
                prof["imm_rsp"][(imm.type, imm.errno)] += 1
        if p[BTH].opcode == 0x0B and p[RETH].dma_len == 0:
            prof["zero_len_reth"][(p[RETH].va, p[RETH].rkey)] += 1
        if RtrsMsgRkeyRsp in p:
            prof["rkey_rsp_type"][p[RtrsMsgRkeyRsp].type] += 1
    for from_client, first, last, data in messages(pkts):
        if not from_client:
            if first[BTH].opcode == 0x0A and len(data) in (36, 56):
                prof["rnbd_reply"][data] += 1
            continue
        if last[BTH].opcode not in (0x09, 0x0B):
            prof["send"][data] += 1  # info_req
            continue
        if not data:
            continue  # heartbeat
        read = split_read(data)
        if read is not None:
            usr_len, sg_cnt = read
            trailer = data[usr_len:]
            desc_len = trailer[20:24] if sg_cnt else b""
            prof["read_trailer"][(trailer[:8], desc_len)] += 1
            usr = data[:usr_len]
        else:
            data_len, usr_len = split_write(data)
            prof["write_trailer"][data[-4:]] += 1
            usr = data[data_len:data_len + usr_len]
        hdr = RnbdMsgHdr(usr)
        if isinstance(hdr, RnbdMsgIo):
            prof["rnbd_io"][(hdr.type, hdr.device_id, hdr.sector, hdr.rw, hdr.bi_size,
                             hdr.prio, bytes(getattr(hdr, "__tail_padding")))] += 1
        else:
            prof["rnbd_admin"][usr] += 1
    return prof


@pytest.fixture(scope="module", params=[name for name, _, _ in REAL])
def real_and_crafted(request):
    for name, path, truth in REAL:
        if name == request.param:
            crafted, crafted_truth = craft_from_truth(truth, seed=7)
            return rdpcap(str(path)), truth, crafted, crafted_truth
    raise LookupError(request.param)


def test_same_opcode_and_length_multiset_per_direction(real_and_crafted):
    real, _truth, crafted, _ = real_and_crafted
    assert len(crafted) == len(real)
    assert shape(crafted) == shape(real)


def test_fixed_field_values_match_real(real_and_crafted):
    real, _truth, crafted, _ = real_and_crafted
    want, got = field_profile(real), field_profile(crafted)
    assert set(want) == set(got)
    for key in want:
        assert got[key] == want[key], key


def test_known_sizes(real_and_crafted):
    """docs/PROTOCOL.md#found-in-real-captures: 4 KiB write = 4132-byte RDMA WRITE in 5 packets at
    PMTU 1024, read request 56 bytes, info_rsp 8 + 16 sg_cnt."""
    _real, truth, crafted, _ = real_and_crafted
    sizes = collections.Counter()
    for from_client, first, last, data in messages(crafted):
        if from_client and last[BTH].opcode in (0x09, 0x0B) and len(data):
            sizes[(len(data), (last[BTH].psn - first[BTH].psn) % (1 << 24) + 1)] += 1
        if not from_client and data[:2] == b"\x01\x00" and first[BTH].opcode in (0x00, 0x04):
            sg_cnt = int.from_bytes(data[2:4], "little")
            assert len(data) == 8 + 16 * sg_cnt
            assert sg_cnt == (512 if truth["config"]["always_invalidate"] else 1)
    assert sizes[(4132, 5)] == sum(1 for io in truth["ios"]
                                   if io["op"] == "write" and io["size"] == 4096) + 2
    assert sizes[(56, 1)] > 0


def test_stats_accounting_matches_kernel_counters(real_and_crafted):
    """rtrs_stats count data_len + usr_len per request; the real counters were read
    before the unmap, so the crafted truth has the RNBD CLOSE (8 bytes) on top."""
    _real, truth, _crafted, crafted_truth = real_and_crafted
    (kernel,) = truth["rtrs_stats"]["client"]["pre_unmap"].values()
    stats = crafted_truth["paths"][0]["stats"]
    assert stats["reads"] == kernel["rdma"]["reads"]
    assert stats["read_bytes"] == kernel["rdma"]["read_bytes"]
    assert stats["writes"] == kernel["rdma"]["writes"] + 1
    assert stats["write_bytes"] == kernel["rdma"]["write_bytes"] + 8


def psn_streams(pkts):
    """First PSN and continuity of each request stream; CM starting PSNs per QP."""
    cip = client_ip(pkts)
    start, nxt, errors = {}, {}, []
    for p in pkts:
        if CMReq in p:
            start[("S>C", p[CMReq].local_qpn)] = p[CMReq].starting_psn
        if CMRep in p:
            start[("C>S", p[CMRep].local_qpn)] = p[CMRep].starting_psn
    first = {}
    for p in pkts:
        bth = p[BTH]
        if bth.opcode in (0x11, 0x64):
            continue
        key = ("C>S" if p["IP"].src == cip else "S>C", bth.dqpn)
        if key in nxt and bth.psn != nxt[key]:
            errors.append((key, bth.psn, nxt[key]))
        first.setdefault(key, bth.psn)
        nxt[key] = (bth.psn + 1) % (1 << 24)
    return start, first, errors


def test_psn_streams_start_where_cm_says(real_and_crafted):
    """rxe: REQ.starting_psn is the first PSN of the server→client stream (keyed here by the
    client QPN it is sent to), REP.starting_psn that of client→server — in the real
    captures as in the crafted ones."""
    for pkts in real_and_crafted[0], real_and_crafted[2]:
        start, first, errors = psn_streams(pkts)
        assert not errors
        assert first == {key: start[key] for key in first}


def rkey_chain(pkts):
    """Per (client QPN set, buf_id): rkeys of the server's rkey_rsp in order."""
    chains = collections.defaultdict(list)
    for p in pkts:
        if RtrsMsgRkeyRsp in p:
            chains[p[RtrsMsgRkeyRsp].buf_id].append(p[RtrsMsgRkeyRsp].rkey)
    return chains


def _corpus_files():
    """{scenario: its file in pcaps/} of the scenarios that scripts/make_corpus.py crafts
    with their default parameters (the first such file of each); test_corpus_up_to_date
    holds each file equal, byte for byte, to a fresh crafting, so the tests below read
    these crafted frames there instead of crafting them again."""
    spec = importlib.util.spec_from_file_location("make_corpus",
                                                  REPO / "scripts" / "make_corpus.py")
    make_corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_corpus)
    files = {}
    for name, scenario, _seed, params, _what, *options in make_corpus.CORPUS:
        if not params and not options:
            files.setdefault(scenario, PROJECT_PCAPS / name)
    return files


CORPUS_FILES = _corpus_files()


def corpus_crafting(scenario):
    """(Scapy packets, truth) of the corpus's crafting of ``scenario``."""
    path = CORPUS_FILES[scenario]
    return rdpcap(str(path)), json.loads(path.with_name(path.name + ".truth.json").read_text())


def test_rkey_plus_one_per_use():
    for name, path, truth in REAL:
        if not truth["config"]["always_invalidate"]:
            continue
        real = rdpcap(str(path))
        crafted, _ = corpus_crafting("basic")
        for pkts in (real, crafted):
            chains = rkey_chain(pkts)
            assert chains
            for keys in chains.values():
                for a, b in zip(keys, keys[1:]):
                    assert b & ~0xFF == a & ~0xFF and b & 0xFF == (a + 1) & 0xFF


def test_deterministic():
    """The same seed, the same frames (time, bytes) and truth; another seed, other bytes."""
    a, ta, _ = craft_frames("io_errors", seed=5)
    b, tb, _ = craft_frames("io_errors", seed=5)
    c, _, _ = craft_frames("io_errors", seed=6)
    assert a == b
    assert ta == tb
    assert [data for _t, data in a] != [data for _t, data in c]


VARIANTS = [{}, {"ip_version": 6}, {"vlan": 100}, {"encap": "rocev1"}, {"encap": "ib"},
            {"pmtu": 4096}, {"always_invalidate": False}]


#: the scenarios of many like batches, crafted with fewer of them: the same layer stacks
#: as with the defaults (sequential: a batch of the default depth each way, the kernel's
#: max_io_size each; load: two batches of the default concurrency, both ops, shuffled),
#: in half (sequential: 2,168 of 4,256) and a third (load: 442 of 1,459) of the frames
FEWER_BATCHES = {"sequential": {"ios": 8}, "load": {"ios": 32}}


ETHERNET = 1   # the pcap link type of every scenario crafted with its defaults


def scenario_frames(name):
    """(frame bytes, truth) of scenario ``name``: the corpus's file where pcaps/ holds
    its crafting with the default parameters, else crafted here (seed 1,
    FEWER_BATCHES)."""
    if name in CORPUS_FILES:
        path = CORPUS_FILES[name]
        truth = json.loads(path.with_name(path.name + ".truth.json").read_text())
        with RawPcapReader(str(path)) as reader:
            frames, linktype = [data for data, _meta in reader], reader.linktype
    else:
        crafted, truth, linktype = craft_frames(name, seed=1, **FEWER_BATCHES.get(name, {}))
        json.dumps(truth)
        frames = [data for _time, data in crafted]
    assert linktype == ETHERNET
    return frames, truth


# real_workload replays a truth.json workload: the comparison with the real captures
# above exercises it.
@pytest.mark.parametrize("name", [n for n in scenario_names() if n != "real_workload"])
def test_scenario_decodes(name):
    """Every frame decodes without exception (debug_dissector on), builds again to its
    bytes, has a valid ICRC, and the RTRS layers appear where the truth says (rejects,
    IO errors)."""
    assert conf.debug_dissector
    frames, truth = scenario_frames(name)
    assert frames and truth["frames"] == len(frames)
    packets = []
    rejects = []
    for raw in frames:
        again = Ether(raw)
        assert bytes(again) == raw
        assert icrc_ok(again)
        packets.append(again)
        if CMRej in again:
            rej = again[CMRej]
            errno = again[RtrsMsgConnRsp].errno if RtrsMsgConnRsp in again else 0
            rejects.append((errno, rej.reason))
    assert rejects == [(r["errno"], r["reason"]) for r in truth["rejects"]]
    errs = collections.Counter()
    for pkt in packets:
        if ImmDt in pkt and pkt[ImmDt].imm >> 28 in (1, 2):
            err = decode_imm(pkt[ImmDt].imm).errno
            if err:
                errs[err] += 1
    from rtrs_scapy.spec.constants import errno_name
    assert {errno_name(k): v for k, v in errs.items()} == truth["errors"]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: ",".join(
    "%s=%s" % kv for kv in v.items()) or "default")
def test_encapsulations_decode(variant):
    frames, truth, _linktype = craft_frames("flush_discard", seed=3, **variant)
    cls = LRH if variant.get("encap") == "ib" else Ether
    for _time, raw in frames:
        again = cls(raw)
        assert BTH in again
        assert icrc_ok(again)
        if again[BTH].opcode == 0x64:
            assert MAD in again
    assert truth["config"]["path_mtu"] == variant.get("pmtu", 1024)


def test_failover_truth():
    packets, truth = corpus_crafting("multipath_failover")
    assert truth["reconnects"] == 1 and truth["path_failures"] == 1
    p0, p1 = truth["paths"]
    assert p1["recon_cnt"] == 2 and p0["recon_cnt"] == 1
    recon = [p[RtrsMsgConnReq].recon_cnt for p in packets if RtrsMsgConnReq in p]
    assert recon.count(2) == 3
    assert truth["heartbeats"]["hb_msg_unanswered"] > 0
    assert truth["failovers"] == 1 and truth["retransmitted_messages"] > 0
    # go-back-N duplicates: same (QP, PSN) more than once, all on the failed path
    seen = collections.Counter((p["IP"].dst, p[BTH].dqpn, p[BTH].psn) for p in packets
                               if p[BTH].opcode not in (0x11, 0x64))
    dups = {key for key, n in seen.items() if n > 1}
    assert dups and {dst for dst, _qp, _psn in dups} == {p1["server_addr"]}
    (moved,) = [io for io in truth["ios"] if io["failover"]]
    (orig,) = [io for io in truth["ios"] if io["errno"] is None]
    assert (moved["buf_id"], moved["path"], orig["path"]) == (orig["buf_id"], 0, 1)


def test_mid_session_has_no_handshake():
    packets, truth = corpus_crafting("mid_session")
    assert not any(MAD in p and p[MAD].attribute_id == 0x10 for p in packets)
    assert truth["capture_start"] is not None and truth["requests"] > 0


@pytest.mark.parametrize("suffix", [".pcap", ".pcapng", ".pcap.gz", ".pcapng.gz"])
def test_cli_writes_all_formats(tmp_path, suffix):
    out = tmp_path / ("x" + suffix)
    result = CliRunner().invoke(craft, ["reject_enomem", "-o", str(out), "--seed", "4",
                                        "--truth"])
    assert result.exit_code == 0, result.output
    packets, truth = craft_scenario("reject_enomem", seed=4)
    back = read_capture(out)
    assert [bytes(p) for p in back] == [bytes(p) for p in packets]
    assert json.loads((tmp_path / ("x" + suffix + ".truth.json")).read_text()) == \
        json.loads(json.dumps(truth))
    write_capture(tmp_path / ("y" + suffix), packets)
    assert (tmp_path / ("y" + suffix)).read_bytes() == out.read_bytes()


def test_cli_list_and_errors():
    runner = CliRunner()
    result = runner.invoke(craft, ["--list"])
    assert result.exit_code == 0 and "multipath_failover" in result.stdout
    assert runner.invoke(craft, ["nope", "-o", "x.pcap"]).exit_code == 2
    assert runner.invoke(craft, ["basic"]).exit_code == 2


def test_corpus_up_to_date():
    """pcaps/ is exactly what scripts/make_corpus.py builds (deterministic crafting)."""
    import subprocess
    import sys
    from conftest import REPO
    result = subprocess.run([sys.executable, str(REPO / "scripts" / "make_corpus.py"), "--check"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    sizes = [p.stat().st_size for p in (REPO / "pcaps").glob("*") if p.is_file()]
    assert sum(sizes) < 10_000_000  # the crafted corpus; pcaps/real/ holds the recordings
    crafted = [p for p in (REPO / "pcaps").glob("*.pcap*") if not p.name.endswith(".json")]
    assert all(p.stat().st_size < 600_000 for p in crafted)


def test_copies_of_a_multipath_capture_keep_their_paths_apart(tmp_path):
    """Two copies of the real multipath capture (a path on 10.77.0.x, one on
    10.77.1.x): read by Scapy, the copies' IPv4 endpoints are on four subnets, two a
    copy, and each copy's paths count the reads and writes the original's count.
    Moving every address to 10.<copy>.x before put both paths of a copy on one subnet:
    their streams collided, and one path lost all its IOs to the other."""
    source = real_pcap("multipath")
    copies = tmp_path / "two.pcap"
    repeat_capture(source, copies, 2 * len(rdpcap(str(source))), session_uuids(source))

    def subnets(path):
        return {address.rsplit(".", 1)[0] for packet in rdpcap(str(path)) if IP in packet
                for address in (packet[IP].src, packet[IP].dst)}
    assert subnets(source) == {"10.77.0", "10.77.1"}
    assert subnets(copies) == {"10.0.0", "10.0.1", "10.0.2", "10.0.3"}

    def counts(path):
        return sorted((p["sess_uuid"][:-4], p["io"]["read"]["count"], p["io"]["write"]["count"])
                      for session in analyze(path, keep_messages=False).summary["sessions"]
                      for p in session["paths"])
    original = counts(source)
    assert len(original) == 2 and all(reads + writes for _, reads, writes in original)
    assert counts(copies) == sorted(original * 2)
