"""Differential test: the Scapy IB/CM layers against tshark's own InfiniBand
dissector, on every frame of every real capture.

tshark runs once per capture (``-T fields``); see tshark_util.py for the field
list and the tshark 4.0 quirks (CM flow label / packet rate not compared).
"""

from collections import Counter

from scapy.utils import rdpcap

from rtrs_scapy.layers.cm import MAD, CMReq
from rtrs_scapy.layers.ib import BTH
from tshark_util import FIELDS, compared_fields, differences, tshark_problem_frames, tshark_rows


_CACHE = {}


def _load(real_capture):
    """(Scapy packets, tshark rows, truth) of a capture, computed once per session."""
    path, truth = real_capture
    if path not in _CACHE:
        _CACHE[path] = (rdpcap(str(path)), tshark_rows(path))
    return _CACHE[path] + (truth,)


def test_every_frame_agrees_with_tshark(real_capture):
    packets, rows, truth = _load(real_capture)
    assert len(rows) == len(packets) == truth["pcap_stats"]["frames"]
    compared = 0
    problems = []
    for number, (pkt, row) in enumerate(zip(packets, rows), 1):
        assert row["frame.number"] == number
        assert BTH in pkt, "frame %d: no BTH" % number
        # the core BTH fields must have been decoded by both sides
        fields = compared_fields(pkt, row)
        for core in ("infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn",
                     "infiniband.invariant.crc"):
            assert core in fields, "frame %d: %s not compared" % (number, core)
        diffs = differences(pkt, row)
        if diffs:
            problems.append((number, diffs))
        compared += 1
    assert problems == []
    assert compared == len(packets)


def test_every_header_kind_was_compared(real_capture):
    """The comparison covered every extension header and CM message in the capture."""
    packets, rows, _ = _load(real_capture)
    seen = Counter()
    for pkt, row in zip(packets, rows):
        for field in compared_fields(pkt, row):
            seen[field.rsplit(".", 1)[0] if field.count(".") > 1 else field] += 1
    for prefix in ("infiniband.bth", "infiniband.reth", "infiniband.aeth", "infiniband.deth",
                   "infiniband.mad", "infiniband.cm.req", "infiniband.cm.rep",
                   "infiniband.cm.rtu", "infiniband.cm.dreq", "infiniband.cm.drsp"):
        assert seen[prefix], prefix
    assert seen["infiniband.immdt"] and seen["infiniband.ieth"]


def test_cm_fields_compared_on_every_req(real_capture):
    packets, rows, _ = _load(real_capture)
    reqs = [(p, r) for p, r in zip(packets, rows) if CMReq in p]
    assert reqs
    for pkt, row in reqs:
        fields = set(compared_fields(pkt, row))
        for name in ("infiniband.cm.req", "infiniband.cm.req.serviceid",
                     "infiniband.cm.req.localqpn", "infiniband.cm.req.startpsn",
                     "infiniband.cm.req.pppmtu", "infiniband.cm.req.ip_cm.sip4",
                     "infiniband.cm.req.prim_localgid_ipv4", "infiniband.mad.transactionid"):
            assert name in fields, name
        assert pkt[MAD].attribute_id == row["infiniband.mad.attributeid"] == 0x10


def test_tshark_reports_no_malformed_ib_frame(real_capture):
    path, _ = real_capture
    assert tshark_problem_frames(path) == []


def test_field_list_is_known_to_tshark():
    """Every compared field exists in this tshark (a typo would compare nothing)."""
    import subprocess

    from tshark_util import TSHARK, tshark_env
    out = subprocess.run([TSHARK, "-G", "fields"], capture_output=True, text=True,
                         env=tshark_env()).stdout
    known = {line.split("\t")[2] for line in out.splitlines() if line.startswith("F\t")}
    assert [f for f in FIELDS if f not in known] == []
