"""A READ's ``invalidate_frame`` on the real captures, against tshark's own InfiniBand
dissector: the server answers a READ with a SEND WITH INVALIDATE whose IETH is the
READ's ``desc[0].key`` (docs/PROTOCOL.md#which-operation-carries-what, rtrs-srv.c
``rtrs_srv_resp_rdma()``).  Each link must point to such a frame, after the READ, with
that key; no frame is claimed twice; in a whole capture every invalidation is claimed
but the retransmissions (the failover capture's dead path resends one 13 times,
docs/PROTOCOL.md#stalls); in a capture cut mid-session an invalidation is left only
where its READ is before the cut."""

import subprocess
from collections import defaultdict

import pytest

from conftest import real_pcap
from ib_decode import write_cut
from rtrs_scapy import engine
from rtrs_scapy.analysis import analyze
from tshark_util import TSHARK, TSHARK_OPTIONS, tshark_env

#: opcodes 0x16/0x17: SEND LAST/ONLY WITH INVALIDATE
WITH_INVALIDATE = "infiniband.bth.opcode == 22 || infiniband.bth.opcode == 23"
WHOLE = ("basic_inval", "errors", "load", "failover")


def first_invalidations(pcap):
    """frame -> IETH key of each SEND WITH INVALIDATE tshark shows, but its
    retransmissions (a PSN seen before on the same QP and host)."""
    run = subprocess.run(
        [TSHARK, *TSHARK_OPTIONS, "-r", str(pcap), "-Y", WITH_INVALIDATE, "-T", "fields",
         "-E", "occurrence=f", "-e", "frame.number", "-e", "ip.dst", "-e",
         "infiniband.bth.destqp", "-e", "infiniband.bth.psn", "-e", "infiniband.ieth"],
        capture_output=True, text=True, env=tshark_env(), timeout=600)
    assert run.returncode == 0, run.stderr
    firsts, seen = {}, set()
    for line in run.stdout.splitlines():
        frame, host, qp, psn, key = line.split("\t")
        if (host, qp, psn) not in seen:
            seen.add((host, qp, psn))
            firsts[int(frame)] = int(key, 16)
    return firsts


def read_links(pcap):
    """(read frame, desc key, invalidate_frame or None) of every READ with a descriptor."""
    return [(rec["frame"], rec["fields"]["desc"]["key"], rec["fields"].get("invalidate_frame"))
            for rec in analyze([str(pcap)], keep_messages=True).messages
            if rec["msg"] == "read" and "desc" in rec["fields"]]


def check_links(pcap):
    """The links' own checks; returns the invalidations no READ claimed."""
    firsts, links = first_invalidations(pcap), read_links(pcap)
    assert links and firsts
    claimed = [inv for _, _, inv in links if inv is not None]
    assert len(claimed) == len(set(claimed))
    for frame, key, inv in links:
        if inv is not None:
            assert firsts.get(inv) == key and inv > frame, (frame, key, inv)
    reads_of = defaultdict(list)
    for frame, key, inv in links:
        reads_of[key].append((frame, inv))
    left = sorted(set(firsts) - set(claimed))
    for inv in left:    # no READ it could have taken: each earlier one went earlier
        assert all(inv_of is not None and inv_of < inv
                   for frame, inv_of in reads_of[firsts[inv]] if frame < inv), inv
    return left


@pytest.mark.parametrize("name", WHOLE)
def test_every_invalidation_of_a_whole_capture_has_its_read(name):
    assert check_links(real_pcap(name)) == []


def test_a_capture_cut_mid_session_leaves_only_the_reads_before_the_cut(tmp_path):
    cut = tmp_path / "load_cut.pcap"
    subprocess.run(["editcap", "-F", "pcap", "-r", str(real_pcap("load")), str(cut),
                    "50000-100000"], check=True, capture_output=True)
    assert check_links(cut)     # some READs are before frame 50,000: their invalidations left


def test_the_links_are_the_same_whatever_rows_a_batch_holds(monkeypatch):
    """The load capture's READs reuse a key more often in a large batch than a key
    keeps recent reads (eight): the reads and invalidations of a batch go together in
    frame order, so its links do not depend on where the batches end."""
    links = read_links(real_pcap("load"))
    monkeypatch.setattr(engine, "ROWS", 1 << 18)
    assert read_links(real_pcap("load")) == links


@pytest.mark.parametrize("name, first", [("failover", 69404), ("multipath", 402),
                                         ("basic_noinval", 155), ("jumbo", 219)])
def test_a_capture_cut_before_a_handshake_links_reads_held_for_their_queue_depth(
        tmp_path, name, first):
    """A capture from a frame in the middle of its IO on: no handshake, so the first
    READs wait for their path's queue depth rule (settling.py) while their invalidations
    arrive; the invalidations wait for them, and every one after its READ is claimed."""
    cut = write_cut(real_pcap(name), first, tmp_path / ("%s_cut.pcap" % name))
    check_links(cut)      # its own checks: a link each READ may make, none missing
