#!/usr/bin/env python3
"""Rebuild the capture corpus in pcaps/ deterministically.

    .venv/bin/python scripts/make_corpus.py [--out pcaps] [--check]

Crafted files come from rtrs_scapy.craft (same code path as
``rtrs-dissect craft SCENARIO -o FILE --seed N -p K=V --truth``); each gets its
ground truth as ``<file>.truth.json``.  The real kernel captures in pcaps/real/
are not generated (see pcaps/real/PROVENANCE.md); pcaps/README.md lists them
beside the crafted files and is written from the same table.  ``--check`` rebuilds into a temporary folder and
fails if anything differs from what is checked in.
"""

import argparse
import filecmp
import hashlib
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rtrs_scapy.craft.scenarios import craft_frames  # noqa: E402
from rtrs_scapy.craft.capture_files import DLT_ERF, write_capture, write_truth  # noqa: E402

SMALL = {"writes4k": 3, "reads4k": 3, "big": 0}

# (file, scenario, seed, params, what it shows[, writer options])
CORPUS = [
    ("basic_inval.pcap", "basic", 1, {},
     "RoCEv2/IPv4, PMTU 1024, always_invalidate=Y: 3 cids, INFO_RSP of 512 descriptors "
     "(9-packet SEND), SESS_INFO/OPEN, partition scan, 4 KiB and 128 KiB (124+4 KiB) IO, "
     "rkey_rsp churn, heartbeats, CLOSE, DREQ/DREP"),
    ("basic_noinval.pcap", "basic", 2, {"always_invalidate": False},
     "the same with always_invalidate=N: one-descriptor INFO_RSP, zero-length "
     "RDMA WRITE WITH IMM responses"),
    ("basic_inval.pcapng", "basic", 1, {}, "basic_inval.pcap as pcapng"),
    ("basic_inval.pcap.gz", "basic", 1, {}, "basic_inval.pcap gzipped"),
    ("basic_ipv6.pcap", "basic", 3, dict(SMALL, ip_version=6),
     "RoCEv2 over IPv6 (GIDs = IPv6 addresses, CMA header ip_version 6)"),
    ("basic_vlan.pcap", "basic", 4, dict(SMALL, vlan=100),
     "RoCEv2/IPv4 in 802.1Q VLAN 100, priority 3"),
    ("basic_rocev1.pcap", "basic", 5, dict(SMALL, encap="rocev1"),
     "RoCEv1: EtherType 0x8915, GRH with link-local GIDs"),
    ("basic_ib.pcap", "basic", 6, dict(SMALL, encap="ib", pmtu=4096),
     "native InfiniBand, pcap link type 247 (LRH, VCRC), PMTU 4096, LIDs in the CM REQ"),
    ("basic_ib_erf.pcap", "basic", 6, dict(SMALL, encap="ib", pmtu=4096),
     "basic_ib.pcap as ERF records (link type 197, ERF type 21 InfiniBand), the form "
     "Wireshark/tshark decode natively", {"erf": True}),
    ("basic_mtu4096.pcap", "basic", 7, dict(SMALL, pmtu=4096, always_invalidate=False),
     "RoCEv2, PMTU 4096 (4 KiB write = FIRST + LAST WITH IMM, INFO_REQ one SEND)"),
    ("reject_econnreset.pcap", "reject_econnreset", 8, {},
     "fast reconnect while the old path is still closing: REJ reason 28, conn_rsp errno "
     "-104; retry ~31 s later succeeds (recon_cnt 3), SESS_INFO/OPEN again"),
    ("reject_enxio.pcap", "reject_enxio", 9, {},
     "REQ with first_conn=0 for an unknown session: REJ -6 (ENXIO)"),
    ("reject_eexist.pcap", "reject_eexist", 10, {},
     "second path with the same addresses: REJ -17 (EEXIST) while the session keeps working"),
    ("reject_enomem.pcap", "reject_enomem", 11, {}, "REJ -12 (ENOMEM)"),
    ("reject_no_listener.pcap", "reject_no_listener", 12, {},
     "REQ to port 1235: CM REJ reason 8 (invalid service ID), zero private data"),
    ("bad_magic.pcap", "bad_magic", 13, {}, "conn_req magic 0x1BBE: REJ -104"),
    ("bad_version.pcap", "bad_version", 14, {}, "conn_req version 3.0: REJ -104"),
    ("multipath_failover.pcap", "multipath_failover", 15, {},
     "two paths; path 1's server goes silent with a write in flight: an unanswered "
     "heartbeat, go-back-N, IO only on path 0, client DREQs when the QP gives up, the write "
     "re-sent on path 0 (failover_cnt 1), reconnect ~31 s later with recon_cnt 2"),
    ("failover_inflight.pcap", "failover_inflight", 20, {},
     "two paths; path 1's server goes silent with 4 requests in flight: go-back-N, client "
     "DREQs, the 4 re-sent on path 0 with their buf_ids (failover_cnt 4 on path 0), path 1 "
     "back ~31 s later"),
    ("failover_undelivered.pcap", "failover_undelivered", 24, {},
     "capture on the server's side: path 1's client link dies with 3 requests in flight, "
     "one answered just before; the answers of the other two (a write, a read) retransmitted "
     "and never acknowledged, a read sent after that never on the wire; the 3 re-sent on "
     "path 0 in buf_id order (failover_cnt 3: 2 proven, 1 by the permits' order; the write "
     "executed twice), path 1 back ~31 s later"),
    ("unmap_6_12.pcap", "unmap_6_12", 25, {},
     "the unmap of Linux 6.12: the client's DREQs, the server's DREP of cid 0 and its own "
     "DREQs for the other cids: one disconnect started by the client, answered by the "
     "server (Linux 6.1 as in basic_inval.pcap: DREQ/DREP per cid)"),
    ("reconnect_timeout.pcap", "reconnect_timeout", 21, {},
     "capture on the server's side: path 1's client link down ~25 s, server heartbeat "
     "retransmitted, server DREQs (sent again), two reconnect attempts whose REPs never "
     "arrive (REQ and REP sent again every ~6 s) end with client REJ Timeout 60 s apart: "
     "reconnects 0 successful, 2 failed"),
    ("server_hb_loss.pcap", "server_hb_loss", 22, {},
     "capture on the server's side: the client's HB_ACK is lost, the server's heartbeat "
     "timer runs out, server DREQs sent again every ~6 s, nobody answers"),
    ("reconnect_third_try.pcap", "reconnect_third_try", 23, {},
     "one path, server silent with 3 requests in flight (lost: no other path); reconnect "
     "attempts: unanswered (client REJ Timeout), REJ -104, success; crossed DREQs at unmap: "
     "reconnects 1 successful, 2 failed"),
    ("io_errors.pcap", "io_errors", 16, {},
     "IO errors in the response immediates: EIO (read, write), ENOSPC (writes), ENOTCONN "
     "(unknown device id), ENOENT on OPEN (SEND-INV only, no open_rsp)"),
    ("flush_discard.pcap", "flush_discard", 17, {},
     "FLUSH (RTRS READ without descriptor, imm type 1), DISCARD and WRITE_ZEROES (36-byte "
     "WRITEs), a WRITE|FUA"),
    ("mid_session.pcap", "mid_session", 18, {},
     "capture starting mid-session: no CM/INFO/OPEN, queue depth must be inferred"),
    ("server_disconnect.pcap", "server_disconnect", 19, {},
     "the server closes the path: DREQs from the server, DREPs from the client"),
] + [
    ("load_c%d_qd%d.pcap" % (concurrency, qd), "load", 30 + k,
     {"concurrency": concurrency, "ios": ios, "queue_depth": qd, "max_size": size},
     "%d IOs of at most %d bytes, %d in flight together, queue depth %d: the sessions that "
     "tests/test_cuts.py cuts at many points" % (ios, size, concurrency, qd))
    for k, (concurrency, qd, ios, size) in enumerate(
        ((1, 512, 24, 16384), (4, 16, 24, 16384), (16, 4096, 32, 16384),
         (64, 128, 64, 8192), (128, 8192, 128, 2048)))
]

#: the real kernel captures (pcaps/real/, described in PROVENANCE.md there)
REAL = {
    "basic_inval": "always_invalidate=Y, one path, 4 KiB and 124/128 KiB IO, idle, unmap",
    "basic_noinval": "the same with always_invalidate=N",
    "jumbo": "IB MTU 4096, IO of every power of two 512 B … 256 KiB",
    "multipath": "two paths, round-robin, remove_path of the second",
    "errors": "three sessions: CM REJ reason 8, OPEN ENOENT, EIO, reconnects, ENOTCONN",
    "discard": "RNBD DISCARD, WRITE_ZEROES and FLUSH",
    "load": "135,237 frames of 4 parallel random 4–16 KiB IO (gzip-compressed)",
}


def command(name, scenario, seed, params, options=None):
    opts = " ".join("-p %s=%s" % kv for kv in sorted(params.items()))
    if (options or {}).get("erf"):
        opts += " --erf"
    return ("rtrs-dissect craft %s -o pcaps/%s --seed %d %s --truth"
            % (scenario, name, seed, opts)).replace("  ", " ")


def readme(entries):
    lines = [
        "# Capture corpus",
        "",
        "Rebuilt byte for byte by `scripts/make_corpus.py` (do not edit by hand; "
        "`--check` verifies).  Crafted files come from `rtrs_scapy.craft` (modelled on "
        "the real Soft-RoCE captures, see tests/test_craft.py); next to each is "
        "`<file>.truth.json`, the crafter's ground truth (requests and bytes per path "
        "counted like the kernel's rtrs stats: data_len + usr_len per request, the RNBD "
        "CLOSE included; errors by errno; heartbeats; per path the kernel's sysfs counters "
        "`kernel.reconnects.successful/failed` and `kernel.failover_cnt`, lost requests, "
        "rejects with sender and reason, disconnects with initiator, outages).",
        "",
        "| file | what it shows | command |",
        "|---|---|---|",
    ]
    for name, scenario, seed, params, what, *options in entries:
        lines.append("| %s | %s | `%s` |" % (name, what, command(name, scenario, seed, params,
                                                                 *options)))
    for name, what in REAL.items():
        pcap = name + (".pcap.gz" if name == "load" else ".pcap")
        lines.append("| real/%s | real Linux 6.1 capture over Soft-RoCE: %s; kernel truth "
                     "beside it | recorded, see real/PROVENANCE.md |" % (pcap, what))
    lines += ["", "Totals are kept small: every crafted file is well under 1 MB.", ""]
    return "\n".join(lines)


def build(out):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    crafted = {}    # the same session in several files (pcap, pcapng, gzip, ERF) crafted once
    for name, scenario, seed, params, _what, *options in CORPUS:
        key = (scenario, seed, tuple(sorted(params.items())))
        if key not in crafted:
            crafted[key] = craft_frames(scenario, seed=seed, **params)
        frames, truth, linktype = crafted[key]
        if options and options[0].get("erf"):
            linktype = DLT_ERF
        write_capture(out / name, frames, linktype=linktype)
        write_truth(out / (name + ".truth.json"), truth)
    (out / "README.md").write_text(readme(CORPUS))


def listing(root):
    root = Path(root)
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and p.parent.name != "real")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "pcaps"))
    parser.add_argument("--check", action="store_true",
                        help="rebuild in a temporary folder and compare with --out")
    args = parser.parse_args()
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            build(tmp)
            want, have = listing(tmp), listing(args.out)
            bad = [f for f in want if f not in have or not filecmp.cmp(
                Path(tmp) / f, Path(args.out) / f, shallow=False)]
            if bad:
                print("corpus differs: " + ", ".join(bad), file=sys.stderr)
                return 1
            print("corpus up to date (%d files)" % len(want), file=sys.stderr)
            return 0
    build(args.out)
    total = 0
    for f in listing(args.out):
        size = (Path(args.out) / f).stat().st_size
        total += size
        digest = hashlib.sha256((Path(args.out) / f).read_bytes()).hexdigest()[:12]
        print("%-40s %9d  %s" % (f, size, digest))
    print("total %d bytes" % total)
    return 0


if __name__ == "__main__":
    sys.exit(main())
