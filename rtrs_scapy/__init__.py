"""rtrs-scapy: Scapy layers, session analyzer and Wireshark dissector for the
Linux kernel's RTRS/RNBD over InfiniBand and RoCE.

``from rtrs_scapy import *`` loads every layer (and binds them into Scapy).
As a Scapy extension: ``conf.exts.load("rtrs-scapy")`` then ``load_contrib("rtrs")``.

The layers are loaded on first use of a name of this package, not by
``import rtrs_scapy`` itself: the capture analysis (``rtrs-dissect summary``)
reads the wire through the generated ``wire.py`` and never imports Scapy.
"""

import importlib
import importlib.util

__version__ = "0.1.0"

_PUBLIC = (".spec.constants", ".layers.ib", ".layers.cm", ".layers.rtrs", ".layers.rtrs_request",
           ".layers.rnbd")
_IMM = {"Imm": "Imm", "decode_imm": "decode", "encode_hb": "encode_hb",
        "encode_io_req": "encode_io_req", "encode_io_rsp": "encode_io_rsp",
        "mem_bits": "mem_bits"}
_names = {}


def _load():
    if not _names:
        for module_name in _PUBLIC:
            module = importlib.import_module(module_name, __name__)
            exported = getattr(module, "__all__", None) or [
                n for n in vars(module) if not n.startswith("_")]
            _names.update({n: getattr(module, n) for n in exported})
        imm = importlib.import_module(".spec.imm", __name__)
        _names.update({name: getattr(imm, attr) for name, attr in _IMM.items()})
    return _names


def __getattr__(name):
    if name == "__all__":
        return sorted(_load())
    if name.startswith("__") or importlib.util.find_spec("%s.%s" % (__name__, name)):
        raise AttributeError(name)  # dunder lookups, and submodules being imported
    names = _load()
    if name in names:
        return names[name]
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def __dir__():
    return sorted(set(globals()) | set(_load()))


def scapy_ext(plg):
    """Scapy extension hook (scapy.config.ExtsManager): layers as contrib 'rtrs'."""
    import os
    plg.config("rtrs-scapy", __version__)
    plg.register(name="rtrs", mode=plg.MODE.CONTRIB,
                 path=os.path.join(os.path.dirname(__file__), "layers", "contrib_rtrs.py"))
