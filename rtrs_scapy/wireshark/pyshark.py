"""pyshark with the RTRS/RNBD dissector loaded: ``pkt.rtrs.*`` and ``pkt.rnbd.*``.

``FileCapture(path, **kwargs)`` and ``LiveCapture(interface, **kwargs)`` are
pyshark's classes with the Lua plugin generated from the Scapy layers added to
tshark's command line (``-X lua_script:…`` through ``custom_parameters``), so
nothing has to be installed first.  Fields keep the plugin's names with dots
turned into underscores: ``pkt.rtrs.imm_buf_id``, ``pkt.rtrs.response_in``,
``pkt.rnbd.io_sector`` (wireshark/README.md lists them all).

A file is dissected in two passes (``tshark -2``), so that a request can link
to its response (``rtrs.response_in``), which comes later in the file; tshark
needs a display filter for that, and ``frame`` (every frame) is used when none
is given.  A live capture has one pass: responses link to their requests
(``rtrs.request_in``, ``rtrs.response_time``).

When a plugin named rtrs.lua is already in Wireshark's personal plugin folder
(``rtrs-dissect wireshark install``), tshark loads that one and a second copy
could not register the same protocols: it is then not added again.
"""

import hashlib
import os
import tempfile
import warnings

import pyshark

from .generate import generate
from .install import PLUGIN_NAME, plugin_dir

ALL_FRAMES = "frame"


def plugin_path():
    """The generated plugin as a file, written once per content into the user's
    cache folder (or the temporary folder when the cache is not writable)."""
    text = generate()
    digest = hashlib.sha1(text.encode()).hexdigest()[:12]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    for folder in (os.path.join(cache, "rtrs-scapy"), tempfile.gettempdir()):
        path = os.path.join(folder, "rtrs-%s.lua" % digest)
        try:
            if not os.path.exists(path):
                os.makedirs(folder, exist_ok=True)
                with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=folder,
                                                 delete=False, suffix=".lua") as tmp:
                    tmp.write(text)
                os.replace(tmp.name, path)
            return path
        except OSError:
            continue
    raise OSError("cannot write the RTRS plugin into %s or %s" % (cache, tempfile.gettempdir()))


def _installed_plugin(folder):
    path = os.path.join(folder, PLUGIN_NAME)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as fh:
        if fh.read() != generate():
            warnings.warn("%s differs from this rtrs-scapy's plugin; tshark uses it "
                          "(rtrs-dissect wireshark install refreshes it)" % path)
    return path


def plugin_parameters():
    """tshark arguments that load the plugin: ``["-X", "lua_script:…"]``, or none
    when tshark loads an installed copy by itself."""
    if _installed_plugin(plugin_dir()):
        return []
    return ["-X", "lua_script:" + plugin_path()]


def _with_plugin(kwargs, extra=()):
    """pyshark keyword arguments with the plugin's tshark arguments in front of
    the caller's ``custom_parameters`` (a list, or a dict as pyshark takes it)."""
    custom = kwargs.get("custom_parameters") or []
    if isinstance(custom, dict):
        custom = [item for pair in custom.items() for item in pair]
    return {**kwargs, "custom_parameters": plugin_parameters() + list(extra) + list(custom)}


class FileCapture(pyshark.FileCapture):
    """pyshark.FileCapture with the RTRS/RNBD plugin, two passes (links both ways)."""

    def __init__(self, input_file=None, **kwargs):
        kwargs.setdefault("display_filter", None)
        if kwargs["display_filter"] is None:
            kwargs["display_filter"] = ALL_FRAMES
        super().__init__(input_file, **_with_plugin(kwargs, ["-2"]))


class LiveCapture(pyshark.LiveCapture):
    """pyshark.LiveCapture with the RTRS/RNBD plugin (one pass: responses link back)."""

    def __init__(self, interface=None, **kwargs):
        super().__init__(interface, **_with_plugin(kwargs))
