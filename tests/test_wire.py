"""rtrs_scapy/layout/wire.py (generated) equals the Scapy layers, and reading it needs no Scapy."""

import subprocess
import sys

from conftest import REPO
from rtrs_scapy.layout import wire
from rtrs_scapy.layers import ib
from rtrs_scapy.layout.from_layers import layout_of
from rtrs_scapy.layout.wiregen import CLASSES


def test_wire_module_is_fresh():
    result = subprocess.run([sys.executable, str(REPO / "scripts" / "make_wire.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_every_layout_equals_the_layer():
    for cls in CLASSES:
        assert wire.LAYOUTS[cls.__name__] == layout_of(cls), cls.__name__


def test_opcode_table_equals_the_layer():
    assert {op: name for op, (name, _) in wire.OPCODES.items()} == ib.OPCODE_NAMES
    assert {op: tuple(h.__name__ for h in chain) for op, (_, chain) in ib.OPCODES.items()} \
        == {op: chain for op, (_, chain) in wire.OPCODES.items()}


def test_importing_the_wire_layouts_imports_no_scapy():
    code = "import sys, rtrs_scapy.layout.wire; print(sorted(m for m in sys.modules if m.startswith('scapy')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
