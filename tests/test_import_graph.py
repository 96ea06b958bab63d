"""Dependencies point one way: layers → layout (→ the generated wire.py) →
capture → engine → analysis → report/CLI, the Wireshark generator beside.  Each
module is imported in a fresh interpreter and the modules it pulled in are read
from ``sys.modules``."""

import json
import subprocess
import sys

import pytest

from conftest import REPO

LAYER_MODULES = sorted("rtrs_scapy.layers." + path.stem
                       for path in (REPO / "rtrs_scapy" / "layers").glob("*.py"))
ENGINE = ("rtrs_scapy.capture", "rtrs_scapy.engine", "rtrs_scapy.analysis",
          "rtrs_scapy.wireshark", "rtrs_scapy.report", "rtrs_scapy.craft", "rtrs_scapy.cli")


def imported_by(module, statement="import %s", package="rtrs_scapy"):
    """The ``package`` modules that importing ``module`` loads in a fresh interpreter."""
    code = ("import json, sys; %s; print(json.dumps(sorted(m for m in sys.modules "
            "if m.split('.')[0] == %r)))" % (statement % module, package))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, check=True)
    return json.loads(done.stdout)


def _below(modules, banned):
    return [m for m in modules if any(m == b or m.startswith(b + ".") for b in banned)]


def test_every_layer_module_is_listed():
    assert "rtrs_scapy.layers.ib" in LAYER_MODULES and "rtrs_scapy.layers.rnbd" in LAYER_MODULES


@pytest.mark.parametrize("module", LAYER_MODULES)
def test_layers_import_neither_layout_nor_engine(module):
    """The layers are the bottom."""
    loaded = imported_by(module)
    assert "rtrs_scapy.layers.ib" in loaded
    assert _below(loaded, ("rtrs_scapy.layout",) + ENGINE) == []


def test_star_import_loads_every_layer_and_no_engine():
    loaded = imported_by("rtrs_scapy", "from %s import *")
    assert {"rtrs_scapy.layers.ib", "rtrs_scapy.layers.rnbd"} <= set(loaded)
    assert _below(loaded, ("rtrs_scapy.layout",) + ENGINE) == []


@pytest.mark.parametrize("module", ["rtrs_scapy.analysis", "rtrs_scapy.cli.summary",
                                    "rtrs_scapy.capture", "rtrs_scapy.engine"])
def test_the_capture_analysis_needs_no_scapy(module):
    """Reading a capture goes through the generated wire.py: no layer, no Scapy."""
    assert imported_by(module, package="scapy") == []
    assert _below(imported_by(module), ("rtrs_scapy.layers", "rtrs_scapy.layout")) == []


def test_layout_imports_the_layers_and_no_engine():
    loaded = imported_by("rtrs_scapy.layout")
    assert "rtrs_scapy.layers.cm" in loaded and "rtrs_scapy.layers.ib" in loaded
    assert _below(loaded, ENGINE) == []
