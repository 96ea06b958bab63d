"""Capture files for crafted sessions: pcap, pcapng (either gzipped), ERF records
for native IB, and the ground-truth JSON next to them.  Deterministic output, so
the corpus can be rebuilt byte for byte."""

import gzip
import json
import struct

from ..layers.ib import DLT_INFINIBAND, LRH

PCAP_MAGIC_USEC = 0xA1B2C3D4
PCAPNG_SECTION_HEADER, PCAPNG_INTERFACE_DESCRIPTION, PCAPNG_ENHANCED_PACKET = 0x0A0D0D0A, 1, 6
PCAPNG_BYTE_ORDER_MAGIC = 0x1A2B3C4D
SNAPLEN = 262144


def pcap_header(linktype, snaplen=SNAPLEN):
    """The classic pcap file header (little-endian, microsecond stamps): the one
    every pcap the crafters write starts with."""
    return struct.pack("<IHHiIII", PCAP_MAGIC_USEC, 2, 4, 0, 0, snaplen, linktype)


def pcap_record(sec, usec, data):
    """A pcap record of ``data``, whole (captured length = original length)."""
    return struct.pack("<IIII", sec, usec, len(data), len(data)) + data


def _pcap_bytes(frames, linktype):
    out = [pcap_header(linktype)]
    for t, data in frames:
        sec = int(t)
        usec = int(round((t - sec) * 1e6))
        if usec >= 1000000:
            sec, usec = sec + 1, usec - 1000000
        out.append(pcap_record(sec, usec, data))
    return b"".join(out)


def _pcapng_bytes(frames, linktype):
    def block(btype, body):
        body += b"\0" * (-len(body) % 4)
        size = len(body) + 12
        return struct.pack("<II", btype, size) + body + struct.pack("<I", size)
    shb = block(PCAPNG_SECTION_HEADER, struct.pack("<IHHq", PCAPNG_BYTE_ORDER_MAGIC, 1, 0, -1))
    idb = block(PCAPNG_INTERFACE_DESCRIPTION, struct.pack("<HHI", linktype, 0, SNAPLEN))  # µs
    out = [shb, idb]
    for t, data in frames:
        ts = int(round(t * 1e6))
        header = struct.pack("<IIIII", 0, ts >> 32, ts & 0xFFFFFFFF, len(data), len(data))
        out.append(block(PCAPNG_ENHANCED_PACKET, header + data))
    return b"".join(out)


DLT_ERF = 197
ERF_TYPE_INFINIBAND = 21


def erf_records(frames):
    """Native IB frames as ERF records (pcap link type 197, ERF type 21), the form
    ibdump-style tools write and Wireshark decodes (it has no link type 247)."""
    out = []
    for t, data in frames:
        sec = int(t)
        frac = int(round((t - sec) * 1e6)) * (1 << 32) // 1000000
        header = struct.pack("<Q", (sec << 32) | frac) + struct.pack(
            ">BBHHH", ERF_TYPE_INFINIBAND, 0x04, 16 + len(data), 0, len(data))
        out.append((t, header + data))
    return out


def write_capture(path, packets_or_frames, linktype=None):
    """Write pcap, pcapng, or either gzipped (``.gz``), chosen by the file extension.

    Accepts Scapy packets (with ``.time``) or ``(time, bytes)`` pairs.  ``linktype=197``
    with native IB frames writes ERF records (see ``erf_records``).  The output is
    deterministic (fixed gzip header), so the corpus can be rebuilt byte for byte.
    """
    path = str(path)
    frames = []
    for item in packets_or_frames:
        if isinstance(item, tuple):
            frames.append(item)
        else:
            frames.append((float(item.time), bytes(item)))
            if linktype is None:
                linktype = DLT_INFINIBAND if isinstance(item, LRH) else 1
    linktype = linktype or 1
    if linktype == DLT_ERF and frames and frames[0][1][8:9] != bytes([ERF_TYPE_INFINIBAND]):
        frames = erf_records(frames)
    base = path[:-3] if path.endswith(".gz") else path
    data = (_pcapng_bytes(frames, linktype) if base.endswith(".pcapng")
            else _pcap_bytes(frames, linktype))
    if path.endswith(".gz"):
        with open(path, "wb") as raw_file:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw_file, mtime=0) as gz:
                gz.write(data)
    else:
        with open(path, "wb") as f:
            f.write(data)


def write_truth(path, truth):
    """The ground truth as stable JSON (sorted keys), e.g. ``<capture>.truth.json``."""
    with open(str(path), "w") as f:
        json.dump(truth, f, indent=1, sort_keys=True)
        f.write("\n")


def read_capture(path):
    """rdpcap for .pcap/.pcapng, gzipped or not (Scapy packets with .time)."""
    from scapy.utils import rdpcap
    path = str(path)
    if path.endswith(".gz"):
        import tempfile
        with gzip.open(path, "rb") as f:
            data = f.read()
        with tempfile.NamedTemporaryFile(suffix=".pcap") as tmp:
            tmp.write(data)
            tmp.flush()
            return rdpcap(tmp.name)
    return rdpcap(path)
