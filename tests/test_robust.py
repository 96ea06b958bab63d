"""Robustness of the Scapy layers.

1. Property-based round trips (hypothesis): every layer class, built from
   random field values within each field's range, decodes back to the same
   field values and the same bytes.
2. A mutation fuzzer over real and crafted frames (bit flips, truncation,
   byte overwrites, length-field blow-ups of sg_cnt / usr_len / CM and
   IP/UDP/GRH/LRH lengths) and over pcap files with corrupted headers, with
   ``conf.debug_dissector`` off as a user runs Scapy: nothing escapes.

Documented exceptions (the only ones tolerated):
* ``struct.error`` from calling the *outermost* class (``Ether(data)``,
  ``LRH(data)``, ``RnbdMsgHdr(data)`` …) on fewer bytes than its fixed header:
  Scapy dissects the first layer unprotected (rdpcap turns that into Raw);
* ``scapy.error.Scapy_Exception`` from rdpcap on a file that is not a capture.
Budget: a few seconds (FUZZ_SECONDS); scripts/fuzz.py does long runs.
"""

import inspect
import os
import random
import signal
import socket
import struct
import time
import uuid
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from scapy.config import conf
from scapy.contrib import roce
from scapy.error import Scapy_Exception
from scapy.fields import (
    FCSField, FieldLenField, IP6Field, PacketField, PacketListField, StrField,
    StrFixedLenField, UUIDField, _BitField,
)
from scapy.layers.l2 import Ether
from scapy.packet import Packet
from scapy.utils import rdpcap

from rtrs_scapy.layers import cm, ib, rnbd, rtrs, rtrs_request
from rtrs_scapy.layers.ib import BTH, LRH
from rtrs_scapy.layers.rnbd import RnbdMsgHdr
from rtrs_scapy.layers.rtrs import RtrsMsg, RtrsMsgRdmaHdr, RtrsMsgRdmaRead, RtrsMsgRdmaWrite, RtrsSgDesc
from rtrs_scapy.layers.rtrs_request import RtrsReadRequest, RtrsRequest, RtrsWriteRequest

from conftest import PROJECT_PCAPS, REAL

FUZZ_SECONDS = float(os.environ.get("RTRS_FUZZ_SECONDS", "3"))
PER_INPUT_SECONDS = 2.0

DISPATCHERS = {RtrsMsg, RtrsMsgRdmaHdr, RnbdMsgHdr, RtrsRequest}
SPECIAL = {RtrsWriteRequest, RtrsReadRequest}


def layer_classes():
    out = []
    for mod in (ib, cm, rtrs, rtrs_request, rnbd, roce):
        for name, cls in vars(mod).items():
            if (inspect.isclass(cls) and issubclass(cls, Packet) and cls.__module__ == mod.__name__
                    and not name.startswith("_") and cls not in DISPATCHERS | SPECIAL
                    and cls.fields_desc):
                out.append(cls)
    return sorted(out, key=lambda c: (c.__module__, c.__name__))


def _int_range(fld):
    if isinstance(fld, _BitField):
        return 0, (1 << abs(fld.size)) - 1
    fmt = fld.fmt[-1]
    bits = 8 * struct.calcsize("<" + fmt)
    if fmt.islower():
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def field_strategy(fld):
    """Values within the field's range; None where the layer fills the field itself."""
    if isinstance(fld, FieldLenField):
        return st.none()
    if isinstance(fld, PacketListField):
        return st.lists(desc_strategy(), max_size=3)
    if isinstance(fld, PacketField):
        raise TypeError("packet field %s needs a special strategy" % fld.name)
    if isinstance(fld, UUIDField):
        return st.binary(min_size=16, max_size=16).map(lambda b: uuid.UUID(bytes=b))
    if isinstance(fld, IP6Field):
        return st.binary(min_size=16, max_size=16).map(
            lambda b: socket.inet_ntop(socket.AF_INET6, b))
    if isinstance(fld, StrFixedLenField):
        size = fld.length_from(None)
        return st.binary(min_size=size, max_size=size)
    if isinstance(fld, StrField):
        return st.binary(max_size=24)
    if isinstance(fld, FCSField):
        lo, hi = 0, (1 << (8 * fld.fld.sz)) - 1
        return st.integers(lo, hi)
    lo, hi = _int_range(fld)
    return st.integers(lo, hi)


def desc_strategy():
    return st.builds(RtrsSgDesc, addr=st.integers(0, (1 << 64) - 1),
                     key=st.integers(0, (1 << 32) - 1), len=st.integers(0, (1 << 32) - 1))


def layer_strategy(cls):
    return st.fixed_dictionaries({f.name: field_strategy(f) for f in cls.fields_desc}).map(
        lambda values: cls(**{k: v for k, v in values.items() if v is not None}))


def wire(pkt, name):
    fld = pkt.get_field(name)
    return fld.i2m(pkt, pkt.getfieldval(name))


LAYERS = layer_classes()


@pytest.mark.parametrize("cls", LAYERS, ids=lambda c: c.__name__)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip(cls, data):
    pkt = data.draw(layer_strategy(cls))
    raw = bytes(pkt)
    back = cls(raw)
    assert bytes(back) == raw
    for fld in cls.fields_desc:
        if isinstance(fld, PacketListField):
            assert [bytes(d) for d in back.getfieldval(fld.name)] == \
                [bytes(d) for d in pkt.getfieldval(fld.name)]
        elif fld.name in pkt.fields:
            assert wire(back, fld.name) == wire(pkt, fld.name), fld.name


def rnbd_request_strategy():
    return st.sampled_from([rnbd.RnbdMsgIo, rnbd.RnbdMsgClose, rnbd.RnbdMsgOpen,
                            rnbd.RnbdMsgSessInfo]).flatmap(layer_strategy)


@settings(max_examples=40, deadline=None)
@given(data=st.binary(max_size=64), usr=st.one_of(st.none(), rnbd_request_strategy()))
def test_write_request_round_trip(data, usr):
    req = RtrsWriteRequest(data=data, usr=usr)
    raw = bytes(req)
    back = RtrsRequest(raw)
    assert isinstance(back, RtrsWriteRequest) or isinstance(back, RtrsReadRequest)
    assert bytes(back) == raw
    if isinstance(back, RtrsWriteRequest):
        assert back.data == data
        assert back.trailer.usr_len == (len(bytes(usr)) if usr is not None else 0)


@settings(max_examples=40, deadline=None)
@given(usr=st.one_of(st.none(), rnbd_request_strategy()), flags=st.integers(0, 0xFFFF),
       desc=st.lists(desc_strategy(), max_size=1))
def test_read_request_round_trip(usr, flags, desc):
    req = RtrsReadRequest(usr=usr, trailer=RtrsMsgRdmaRead(flags=flags, desc=desc))
    raw = bytes(req)
    back = RtrsRequest(raw)
    assert bytes(back) == raw
    assert isinstance(back, RtrsReadRequest)
    assert back.trailer.sg_cnt == len(desc) and back.trailer.flags == flags


# -- mutation fuzzer -------------------------------------------------------------

@contextmanager
def dissector_debug(on):
    old = conf.debug_dissector
    conf.debug_dissector = on
    try:
        yield
    finally:
        conf.debug_dissector = old


class Hang(Exception):
    pass


@contextmanager
def time_limit(seconds):
    def alarm(_sig, _frame):
        raise Hang()
    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def header_len(cls, data):
    """Fixed header size of the class ``cls(data)`` would dissect (the dispatcher's
    pick when it can tell, else ``cls`` itself)."""
    if "dispatch_hook" in cls.__dict__:  # Scapy only calls a class's own hook
        try:
            cls = cls.dispatch_hook(data) or cls
        except Exception:  # noqa: BLE001 - the dispatcher itself is exercised by exercise()
            pass
    return len(bytes(cls()))


def exercise(cls, data, seconds=PER_INPUT_SECONDS):
    """Decode like a user would and touch every display path; return the exception
    that escaped (None if none or a documented one; Hang past ``seconds``)."""
    try:
        with time_limit(seconds):
            pkt = cls(data)
            pkt.summary()
            pkt.show(dump=True)
            repr(pkt)
            bytes(pkt)
    except struct.error as exc:
        if len(data) < header_len(cls, data):
            return None
        return exc
    except Exception as exc:  # noqa: BLE001 - every other escape is a finding
        return exc
    return None


def mutate(rng, frame, bth_off):
    data = bytearray(frame)
    kind = rng.randrange(6)
    if kind == 0:  # bit flips
        for _ in range(rng.randrange(1, 9)):
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
    elif kind == 1:  # truncation
        data = data[:rng.randrange(len(data))]
    elif kind == 2:  # random bytes overwritten
        for _ in range(rng.randrange(1, 5)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif kind == 3 and bth_off is not None:  # length fields of RTRS/RNBD: sg_cnt, usr_len
        pay = bth_off + 12
        candidates = [pay + o for o in range(0, max(len(data) - pay - 4, 1), 2)]
        for _ in range(rng.randrange(1, 3)):
            i = rng.choice(candidates)
            if i + 2 <= len(data):
                data[i:i + 2] = rng.choice([b"\xff\xff", b"\x00\x80", b"\x01\x00", b"\x00\x00"])
    elif kind == 4:  # outer length fields: IP total length, UDP length, GRH paylen, LRH pktlen
        for off in (16, 38, 18, 2, 4):
            if off + 2 <= len(data) and rng.random() < 0.5:
                data[off:off + 2] = rng.choice([b"\xff\xff", b"\x00\x00", b"\x00\x10"])
    else:  # CM: reject_info_length, attribute id, private data magic area
        if bth_off is not None and len(data) > bth_off + 12 + 8 + 40:
            mad = bth_off + 12 + 8
            for off in (16, 17, 33, 36 + 24, 60, 108):
                if mad + off < len(data) and rng.random() < 0.4:
                    data[mad + off] = rng.randrange(256)
    return bytes(data)


def frame_pool():
    """(class, frame bytes, BTH offset) from the real captures and the crafted corpus."""
    pool = []
    for _name, path, _truth in REAL:
        pool += [(Ether, bytes(p), 42) for p in rdpcap(str(path))[:300]]
    for name, off in (("io_errors.pcap", 42), ("basic_ib.pcap", 8), ("basic_rocev1.pcap", 54),
                      ("basic_ipv6.pcap", 62), ("basic_vlan.pcap", 46),
                      ("multipath_failover.pcap", 42), ("flush_discard.pcap", 42)):
        cls = LRH if "_ib" in name else Ether
        pool += [(cls, bytes(p), off) for p in rdpcap(str(PROJECT_PCAPS / name))]
    return pool


@pytest.fixture(scope="module")
def pool():
    frames = frame_pool()
    assert frames
    return frames


def test_mutated_frames_never_escape(pool):
    rng = random.Random(int(os.environ.get("RTRS_FUZZ_SEED", "1")))
    tried, crashes = 0, []
    deadline = time.monotonic() + FUZZ_SECONDS
    with dissector_debug(False):
        while time.monotonic() < deadline:
            cls, frame, off = rng.choice(pool)
            data = mutate(rng, frame, off)
            tried += 1
            exc = exercise(cls, data)
            if exc is not None:
                crashes.append((type(exc).__name__, str(exc)[:80], data.hex()))
    assert tried > 100
    assert not crashes, crashes[:3]


def message_pool(pool):
    """IB payloads of the frames (RTRS/RNBD messages as the analyzer hands them to layers)."""
    out = []
    for cls, frame, _off in pool[:400]:
        pkt = cls(frame)
        if BTH in pkt and pkt[BTH].payload:
            layer = pkt[BTH]
            while layer.payload and not isinstance(layer.payload, conf.raw_layer) and \
                    type(layer.payload).__module__.endswith(("ib", "roce")):
                layer = layer.payload
            out.append(bytes(layer.payload))
    return [m for m in out if m]


def test_mutated_messages_through_message_layers(pool):
    """RtrsRequest, RtrsMsg, RnbdMsgHdr, RtrsMsgRdmaHdr and the fixed messages on
    mutated message bytes (as an analyzer calls them), debug_dissector off."""
    rng = random.Random(2)
    messages = message_pool(pool)
    classes = [RtrsRequest, RtrsMsg, RnbdMsgHdr, RtrsMsgRdmaHdr, RtrsMsgRdmaRead,
               RtrsMsgRdmaWrite, rtrs.RtrsMsgInfoRsp, rtrs.RtrsMsgConnReq, rtrs.RtrsMsgConnRsp,
               rnbd.RnbdMsgIo, rnbd.RnbdMsgOpenRsp]
    crashes = []
    deadline = time.monotonic() + FUZZ_SECONDS / 2
    tried = 0
    with dissector_debug(False):
        while time.monotonic() < deadline:
            msg = mutate(rng, rng.choice(messages), 0)
            if rng.random() < 0.3:  # length blow-up at a random even offset
                i = rng.randrange(0, max(len(msg) - 1, 1)) & ~1
                msg = msg[:i] + b"\xff\xff" + msg[i + 2:]
            cls = rng.choice(classes)
            tried += 1
            exc = exercise(cls, msg)
            if exc is not None:
                crashes.append((cls.__name__, type(exc).__name__, str(exc)[:80], msg.hex()))
    assert tried > 50
    assert not crashes, crashes[:3]


def test_request_dissectors_raise_only_valueerror_when_asked():
    """With debug_dissector on, a request class on bytes without its trailer raises the
    documented ValueError (layers/rtrs_request.py); the dispatcher gives Raw instead."""
    with dissector_debug(True):
        with pytest.raises(ValueError):
            RtrsWriteRequest(b"\x00" * 9)
        assert isinstance(RtrsRequest(b"\x00" * 9), conf.raw_layer)


def corrupt_pcap(rng, blob):
    data = bytearray(blob)
    kind = rng.randrange(5)
    if len(data) < 40 and kind in (1, 2, 4):  # no record to corrupt
        kind = rng.choice([0, 3])
    if kind == 0:  # global header field
        off = rng.choice([0, 4, 8, 16, 20])
        data[off:off + 4] = struct.pack("<I", rng.choice([0, 0xFFFFFFFF, 0xA1B2C3D4, 247, 197]))
    elif kind == 1:  # first record: incl_len / orig_len
        off = 24 + rng.choice([8, 12])
        data[off:off + 4] = struct.pack("<I", rng.choice([0, 1, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF]))
    elif kind == 2:  # a later record header
        off = 24 + 16 + struct.unpack_from("<I", data, 32)[0]
        if off + 16 <= len(data):
            data[off + 8:off + 12] = struct.pack("<I", rng.choice([0xFFFFFFF0, 3, 100000]))
    elif kind == 3:  # truncated file
        data = data[:rng.randrange(max(len(data), 1))]
    else:  # timestamps
        data[24:32] = bytes(rng.randrange(256) for _ in range(8))
    return bytes(data)


def test_corrupted_pcap_headers(tmp_path):
    rng = random.Random(3)
    sources = [PROJECT_PCAPS / "io_errors.pcap", PROJECT_PCAPS / "reject_enomem.pcap",
               PROJECT_PCAPS / "basic_ib.pcap"]
    target = tmp_path / "bad.pcap"
    crashes = []
    deadline = time.monotonic() + FUZZ_SECONDS / 2
    with dissector_debug(False):
        while time.monotonic() < deadline:
            target.write_bytes(corrupt_pcap(rng, rng.choice(sources).read_bytes()))
            try:
                with time_limit(5):
                    for pkt in rdpcap(str(target)):
                        pkt.summary()
            except Scapy_Exception:
                pass
            except Exception as exc:  # noqa: BLE001
                crashes.append((type(exc).__name__, str(exc)[:80]))
    assert not crashes, crashes[:3]
