"""Captures of switch mirrors and overlays (docs/PROTOCOL.md#switch-mirrors-and-overlays):
every real capture wrapped frame by frame in ERSPAN type I, II and III, GRE transparent
Ethernet bridging, VXLAN, Geneve and MPLS (tests/encap_wrap.py, written from the RFCs)
gives the summary of the capture as it is, plus the ``capture.mirror`` that names the
wrapping; tshark's own dissectors decode the same InfiniBand frames inside, and the
Wireshark plugin the same RTRS fields.  Hostile nesting and cut outer headers are
located in bounded time and never crash."""

import subprocess

import numpy as np
import pytest

from conftest import PROJECT_PCAPS, REAL_ALL
from encap_wrap import (
    ENCAPSULATIONS, GENEVE_OPTIONS, ether, geneve, gre, ipv4, ipv6, mpls, plain_capture,
    read_frames, strip_ethernet, tagged, udp, vxlan, wrap_capture, wrapper, write_frames,
)
from test_wireshark_diff import LUA, tshark_fields
from tshark_util import TSHARK, TSHARK_OPTIONS, tshark_env
from rtrs_scapy.analysis import analyze
from rtrs_scapy.analysis.parts import map_file, reduce_parts
from rtrs_scapy.capture import open_capture
from rtrs_scapy.capture.columns import P_KIND, X_MIRROR
from rtrs_scapy.capture.files import Chunk
from rtrs_scapy.capture.ib import decode_chunk
from rtrs_scapy.capture.links import mirror_entry
from rtrs_scapy.report import html
from rtrs_scapy.report.text import render
from rtrs_scapy.report.view import CaptureView

#: the large captures are represented by their first frames
FIRST_FRAMES = {"load": 1500, "failover": 1500, "deep": 1500}
CAPTURES = [(name, path) for name, path, _truth in REAL_ALL]


def comparable(summary):
    """A summary without what names the file and the wrapping."""
    capture = {k: v for k, v in summary["capture"].items() if k not in ("path", "files", "mirror")}
    return dict(summary, capture=capture)


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """name -> (the capture's frames as a pcap, its summary)."""
    folder = tmp_path_factory.mktemp("plain")
    done = {}
    for name, path in CAPTURES:
        pcap = plain_capture(path, folder / (name + ".pcap"), FIRST_FRAMES.get(name))
        done[name] = pcap, analyze(str(pcap), keep_messages=False).summary
    return done


@pytest.mark.parametrize("encapsulation", sorted(ENCAPSULATIONS))
def test_every_real_capture_wrapped_gives_its_summary(encapsulation, plain, tmp_path):
    expected_mirror = ENCAPSULATIONS[encapsulation][3]
    for name, path in CAPTURES:
        wrapped = wrap_capture(path, tmp_path / (name + ".pcap"), encapsulation,
                               FIRST_FRAMES.get(name))
        summary = analyze(str(wrapped), keep_messages=False).summary
        reference = plain[name][1]
        assert reference["sessions"], name
        assert "mirror" not in reference["capture"]
        assert summary["capture"]["mirror"] == expected_mirror, name
        assert comparable(summary) == comparable(reference), (name, encapsulation)


def test_the_text_says_once_how_the_capture_was_mirrored(tmp_path):
    name, path = CAPTURES[0]
    lines = render(analyze(str(wrap_capture(path, tmp_path / "e.pcap", "erspan2"))).summary)
    assert [line.strip() for line in lines.splitlines() if "ERSPAN" in line] == [
        "mirrored: ERSPAN type II, session 7"]
    lines = render(analyze(str(wrap_capture(path, tmp_path / "v.pcap", "vxlan"))).summary)
    assert "  tunnelled: VXLAN, VNI 5001" in lines.splitlines()


def test_the_report_names_the_outer_headers(tmp_path):
    name, path = CAPTURES[0]
    batches = []
    result = analyze(str(wrap_capture(path, tmp_path / "g.pcap", "gre_teb")),
                     io_sink=batches.append)
    page = html.render(CaptureView(result, batches))
    assert "<td>outer headers</td><td>mirrored: GRE transparent Ethernet bridging, " \
           "key 42</td>" in page


def test_several_encapsulations_are_listed(tmp_path):
    name, path = CAPTURES[0]
    erspan3, geneve = (wrapper(*ENCAPSULATIONS[e][:3]) for e in ("erspan3", "geneve"))
    both = write_frames(tmp_path / "both.pcap", *read_frames(path),
                        lambda frame, n: (erspan3 if n < 500 else geneve)(frame, n))
    mirror = analyze(str(both)).summary["capture"]["mirror"]
    assert mirror == [ENCAPSULATIONS["erspan3"][3], ENCAPSULATIONS["geneve"][3]]


def test_files_mapped_apart_name_the_same_mirrors(plain, tmp_path):
    """The map/reduce of parts (analysis/parts.py): each file's mirrors reach the summary."""
    name, path = CAPTURES[0]
    first = wrap_capture(path, tmp_path / "a.pcap", "erspan2", 700)
    endian, header, records = read_frames(path)
    rest = write_frames(tmp_path / "b.pcap", endian, header, records[700:],
                        wrapper(*ENCAPSULATIONS["vxlan_ipv6"][:3]))
    parts = [map_file(str(rest)), map_file(str(first))]
    reduced = reduce_parts(parts, keep_messages=False).summary
    assert reduced["capture"]["mirror"] == [ENCAPSULATIONS["erspan2"][3],
                                            ENCAPSULATIONS["vxlan_ipv6"][3]]
    assert comparable(reduced)["sessions"] == comparable(plain[name][1])["sessions"]


# --- the Scapy side -------------------------------------------------------------------------

@pytest.mark.parametrize("encapsulation", ["erspan3", "mpls"])
def test_frames_wrapped_with_scapys_layers(encapsulation, plain, tmp_path):
    """``rtrs-dissect craft --mirror`` wraps with Scapy's own layers (craft/mirror.py):
    the engine reads what Scapy writes, and Scapy decodes the RTRS layers inside."""
    from rtrs_scapy.craft.mirror import LABELS, SESSION, VNI, WRAPPERS
    from rtrs_scapy.layers.ib import BTH
    from scapy.layers.l2 import Ether
    endian, header, records = read_frames(plain["errors"][0])
    wrap = WRAPPERS[encapsulation]
    pcap = write_frames(tmp_path / "scapy.pcap", endian, header, records,
                        lambda frame, n: bytes(wrap(frame, n)))
    summary = analyze(str(pcap), keep_messages=False).summary
    ids = {"erspan3": ("session", SESSION), "geneve": ("vni", VNI), "mpls": ("label", LABELS[0])}
    assert summary["capture"]["mirror"] == dict([("encapsulation", encapsulation),
                                                 ids[encapsulation]])
    reference = plain["errors"][1]
    assert comparable(summary)["sessions"] == comparable(reference)["sessions"]
    assert summary["anomalies"] == reference["anomalies"]
    for n, (_stamp, inner) in enumerate(records[:60]):
        if BTH in Ether(inner):
            outer = Ether(bytes(wrap(inner, n)))
            assert outer[BTH].layers() == Ether(inner)[BTH].layers()
            assert bytes(outer[BTH]) == bytes(Ether(inner)[BTH])


# --- tshark as the referee --------------------------------------------------------------

IB_FIELDS = ["infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn"]


def _tshark_ib(pcap, extra=()):
    """tshark's InfiniBand rows: (opcode, QP, PSN) of every frame it finds IB in."""
    cmd = [TSHARK, "-n", "-r", str(pcap), *TSHARK_OPTIONS, *extra, "-Y", "infiniband",
           "-T", "fields", "-E", "separator=\t", "-E", "occurrence=f"]
    for field in IB_FIELDS:
        cmd += ["-e", field]
    run = subprocess.run(cmd, capture_output=True, text=True, env=tshark_env(), timeout=300)
    assert run.returncode == 0, run.stderr
    return run.stdout.splitlines()


def test_tshark_decodes_the_same_infiniband_frames_inside_each_wrapping(plain, tmp_path):
    """One tshark run over every wrapping of one capture in a row."""
    name = "errors"
    pcap = plain[name][0]
    reference = _tshark_ib(pcap)
    assert len(reference) > 400
    names = sorted(ENCAPSULATIONS)
    parts = [wrap_capture(pcap, tmp_path / (n + ".pcap"), n).read_bytes() for n in names]
    joined = tmp_path / "all.pcap"
    joined.write_bytes(parts[0] + b"".join(part[24:] for part in parts[1:]))
    rows = _tshark_ib(joined)
    per = len(reference)
    assert len(rows) == per * len(names)
    for k, encapsulation in enumerate(names):
        assert rows[k * per:(k + 1) * per] == reference, encapsulation


@pytest.mark.parametrize("encapsulation", ["erspan3_platform", "vxlan_ipv6"])
def test_the_plugin_decodes_mirrored_frames(encapsulation, plain, tmp_path):
    """The rtrs/rnbd fields of tshark + wireshark/rtrs.lua: the same on each frame,
    addresses (the innermost IP header's) included."""
    assert LUA.exists()
    pcap = plain["errors"][0]
    wrapped = wrap_capture(pcap, tmp_path / "w.pcap", encapsulation)
    reference = tshark_fields(pcap)
    assert any(reference.values())
    assert tshark_fields(wrapped) == reference


# --- hostile ------------------------------------------------------------------------------

def _located(frames):
    """(kinds, mirror codes) the locator gives Ethernet frames."""
    data = b"".join(frames)
    offs, at = [], 0
    for frame in frames:
        offs.append(at)
        at += len(frame)
    packets, extra = decode_chunk(np.frombuffer(data, np.uint8), np.array(offs, np.int64),
                                  np.array([len(f) for f in frames], np.int64),
                                  np.ones(len(frames), np.int64))
    return packets[:, P_KIND].tolist(), extra[:, X_MIRROR].tolist()


def _roce_frame(plain):
    _endian, _header, frames = read_frames(plain["errors"][0], 2)
    return frames[1][1]


def test_ip_in_gre_and_geneve_mpls_in_gre_vlan_inside(plain):
    """The rarer paths: IP straight in GRE and in Geneve, an MPLS stack in GRE, a VLAN tag
    on the inner frame, VXLAN on Linux's port 8472; each located, its outermost tunnel
    named."""
    frame = _roce_frame(plain)
    packet = strip_ethernet(frame)
    cases = [
        (ether(0x0800, ipv4(47, gre(0x0800, packet, key=5))), {"encapsulation": "gre", "key": 5}),
        (ether(0x86DD, ipv6(17, udp(6081, geneve(9, packet, GENEVE_OPTIONS, proto=0x0800)))),
         {"encapsulation": "geneve", "vni": 9}),
        (ether(0x0800, ipv4(47, gre(0x8847, mpls([16, 17, 18], packet)))),
         {"encapsulation": "gre"}),
        (ether(0x0800, ipv4(17, udp(4789, vxlan(3, tagged(frame, 30)))), vlan=20),
         {"encapsulation": "vxlan", "vni": 3}),
        # Linux's vxlan default port (drivers/net/vxlan: the udp_port module parameter,
        # 8472, used when `ip link add … type vxlan` has no dstport)
        (ether(0x0800, ipv4(17, udp(8472, vxlan(4, frame)))), {"encapsulation": "vxlan", "vni": 4}),
    ]
    kinds, codes = _located([wrapped for wrapped, _entry in cases])
    assert kinds == [1] * len(cases)
    assert [mirror_entry(code) for code in codes] == [entry for _wrapped, entry in cases]


def test_gre_in_gre_nests_to_a_bound(plain):
    frame = _roce_frame(plain)

    def nest(depth):
        out = frame
        for k in range(depth):
            out = ether(0x0800, ipv4(47, gre(0x6558, out, key=k)))
        return out
    kinds, mirrors = _located([nest(d) for d in range(12)])
    assert kinds[:9] == [1] * 9 and kinds[9:] == [0] * 3   # 8 tunnels at most
    assert mirrors[0] == 0 and mirrors[1] != 0
    # a GRE loop a hostile file claims: 1,000 nested headers in one frame
    deep = nest(1000)
    assert len(deep) > 40_000
    assert _located([deep]) == ([0], [0])


def test_cut_outer_headers_locate_nothing_and_never_crash(plain):
    """Every prefix of a frame in each wrapping: nothing located until the IB packet is
    whole, never an exception."""
    frame = _roce_frame(plain)
    for encapsulation in sorted(ENCAPSULATIONS):
        wrapped = wrapper(*ENCAPSULATIONS[encapsulation][:3])(frame, 1)
        assert len(wrapped) > len(frame) - 14
        kinds, _ = _located([wrapped[:cut] for cut in range(len(wrapped) - len(frame) + 60)])
        assert set(kinds) == {0}, encapsulation
        assert _located([wrapped])[0] == [1]



def test_the_walk_counts_each_chunk_as_its_columns_do(tmp_path):
    """A chunk's counts come from the walk's tally (capture/records.py ``_tally``): the
    records with IB headers and the mirror codes, chunk by chunk, are those its packet
    columns give, frames wrapped and plain mixed, in pcap and pcapng."""
    _, path = CAPTURES[0]
    erspan2 = wrapper(*ENCAPSULATIONS["erspan2"][:3])
    mixed = write_frames(tmp_path / "mixed.pcap", *read_frames(path),
                         lambda frame, n: erspan2(frame, n) if n % 3 == 0 and n > 300 else frame)
    counted = {}
    for capture in (mixed, PROJECT_PCAPS / "basic_inval.pcapng"):
        counted[capture] = []
        with open_capture(str(capture)) as cap:
            for chunk in cap.chunks(128):
                assert chunk.tally is not None
                from_columns = Chunk(chunk.data, chunk.buf, chunk.first_frame, chunk.offs,
                                     chunk.caplens, chunk.stamps, chunk.links,
                                     chunk.packets, chunk.origlens, chunk.extra)
                assert chunk.counts() == from_columns.counts()
                counted[capture].append(chunk.counts())
    mirrored = [mirrors for _, _, mirrors in counted[mixed]]
    assert not mirrored[0] and any(mirrored)      # plain first, wrapped from frame 301
    assert all(ib > 0 for ib, _, _ in counted[PROJECT_PCAPS / "basic_inval.pcapng"])
