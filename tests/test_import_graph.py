"""Dependencies point one way: layers → layout → engine (fast path, analysis,
Wireshark generator).  Each module is imported in a fresh interpreter and the
modules it pulled in are read from ``sys.modules``."""

import json
import subprocess
import sys

import pytest

from conftest import REPO

LAYER_MODULES = sorted("rtrs_scapy.layers." + path.stem
                       for path in (REPO / "rtrs_scapy" / "layers").glob("*.py"))
ENGINE = ("rtrs_scapy.fastpath", "rtrs_scapy.analysis", "rtrs_scapy.wireshark",
          "rtrs_scapy.report", "rtrs_scapy.craft", "rtrs_scapy.cli")


def imported_by(module):
    """The rtrs_scapy modules that ``import module`` loads in a fresh interpreter."""
    code = ("import json, sys, %s; print(json.dumps(sorted(m for m in sys.modules "
            "if m.split('.')[0] == 'rtrs_scapy')))" % module)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, check=True)
    return json.loads(done.stdout)


def _below(modules, banned):
    return [m for m in modules if any(m == b or m.startswith(b + ".") for b in banned)]


def test_every_layer_module_is_listed():
    assert "rtrs_scapy.layers.ib" in LAYER_MODULES and "rtrs_scapy.layers.rnbd" in LAYER_MODULES


@pytest.mark.parametrize("module", LAYER_MODULES + ["rtrs_scapy"])
def test_layers_import_neither_layout_nor_engine(module):
    """The layers (and the package's top, which loads every layer) are the bottom."""
    loaded = imported_by(module)
    assert "rtrs_scapy.layers.ib" in loaded
    assert _below(loaded, ("rtrs_scapy.layout",) + ENGINE) == []


def test_layout_imports_the_layers_and_no_engine():
    loaded = imported_by("rtrs_scapy.layout")
    assert "rtrs_scapy.layers.cm" in loaded and "rtrs_scapy.layers.ib" in loaded
    assert _below(loaded, ENGINE) == []
