"""rtrs-scapy: Scapy layers, session analyzer and Wireshark dissector for the
Linux kernel's RTRS/RNBD over InfiniBand and RoCE.

``from rtrs_scapy import *`` loads every layer (and binds them into Scapy).
As a Scapy extension: ``conf.exts.load("rtrs-scapy")`` then ``load_contrib("rtrs")``.
"""

from .constants import *  # noqa: F401,F403
from .imm import Imm, decode as decode_imm, encode_hb, encode_io_req, encode_io_rsp, mem_bits  # noqa: F401
from .layers.ib import *  # noqa: F401,F403
from .layers.cm import *  # noqa: F401,F403
from .layers.rtrs import *  # noqa: F401,F403
from .layers.rtrs_request import *  # noqa: F401,F403
from .layers.rnbd import *  # noqa: F401,F403

__version__ = "0.1.0"


def scapy_ext(plg):
    """Scapy extension hook (scapy.config.ExtsManager): layers as contrib 'rtrs'."""
    import os
    plg.config("rtrs-scapy", __version__)
    plg.register(name="rtrs", mode=plg.MODE.CONTRIB,
                 path=os.path.join(os.path.dirname(__file__), "contrib_rtrs.py"))
