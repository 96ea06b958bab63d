"""Importing rtrs_scapy leaves Scapy as other users have it: scapy.contrib.roce's
classes keep every attribute (methods, fields, opcode names, bindings), and the
binding tables of UDP and Ether keep their entries in their order.  The project's
BTH/GRH subclasses take over roce's two bindings (UDP port 4791, EtherType 0x8915)
with split_bottom_up and bind_bottom_up, Scapy's mechanism for it.

Checked in a fresh interpreter with every Scapy layer loaded (``scapy.all``), as a
user session has them."""

import json
import subprocess
import sys

import pytest

from conftest import REPO

PROBE = r'''
import json
from scapy.all import *  # noqa: F401,F403
from scapy.contrib import roce
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether

ROCE = {"BTH": roce.BTH, "GRH": roce.GRH, "AETH": roce.AETH, "CNPPadding": roce.CNPPadding}
before = {name: dict(vars(cls)) for name, cls in ROCE.items()}
opcode_names = dict(roce.BTH.fields_desc[0].i2s)
guesses = {"UDP": list(UDP.payload_guess), "Ether": list(Ether.payload_guess)}

import rtrs_scapy  # noqa: E402,F401
from rtrs_scapy.layers import ib  # noqa: E402


def entry(fval, cls):
    return [fval, cls.__module__ + "." + cls.__name__]


print(json.dumps({
    "changed": sorted("%s.%s" % (name, attr)
                      for name, cls in ROCE.items()
                      for attr in set(before[name]) | set(vars(cls))
                      if before[name].get(attr, None) is not vars(cls).get(attr, None)),
    "opcode_names_kept": dict(roce.BTH.fields_desc[0].i2s) == opcode_names,
    "before": {k: [entry(f, c) for f, c in v] for k, v in guesses.items()},
    "after": {"UDP": [entry(f, c) for f, c in UDP.payload_guess],
              "Ether": [entry(f, c) for f, c in Ether.payload_guess]},
}))
'''


@pytest.fixture(scope="module")
def probe():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          cwd=REPO, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_roce_classes_are_untouched(probe):
    assert probe["changed"] == []
    assert probe["opcode_names_kept"]


@pytest.mark.parametrize("lower, fields, layer", [("UDP", {"dport": 4791}, "BTH"),
                                                  ("Ether", {"type": 0x8915}, "GRH")])
def test_binding_tables_keep_their_order(probe, lower, fields, layer):
    taken_over = [fields, "scapy.contrib.roce." + layer]
    subclass = [fields, "rtrs_scapy.layers.ib." + layer]
    before, after = probe["before"][lower], probe["after"][lower]
    assert taken_over in before
    kept = [e for e in before if e != taken_over]
    assert after[:len(kept)] == kept, "an entry was inserted ahead of Scapy's or removed"
    added = after[len(kept):]
    assert subclass in added
    assert all(cls.startswith("rtrs_scapy.layers.") for _fval, cls in added)


def test_no_scapy_binding_claims_a_rocev2_source_port(probe):
    """RoCEv2 senders use source ports 0xC000-0xFFFF (Linux rdma_flow_label_to_udp_sport,
    rxe): with every Scapy layer loaded, no other UDP binding matches a port there, so
    every such packet to port 4791 reaches the BTH binding."""
    claims = [(fval, cls) for fval, cls in probe["after"]["UDP"]
              if not cls.startswith("rtrs_scapy.")
              and any(key in ("sport", "dport") and 0xC000 <= value <= 0xFFFF
                      for key, value in fval.items())]
    assert claims == []
