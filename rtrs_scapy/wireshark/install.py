"""Install the generated dissector into the personal Wireshark Lua plugin folder.

Where Wireshark looks is best answered by Wireshark itself: ``tshark -G folders``
prints "Personal Lua Plugins" with every environment override applied.  Without
tshark the folder is computed like Wireshark 4.0 does (measured): on Linux and
macOS ``~/.local/lib/wireshark/plugins`` — Wireshark ignores XDG_CONFIG_HOME and
WIRESHARK_CONFIG_DIR for plugins there, both only move the *configuration*
folder — and on Windows ``<personal configuration>/plugins``, i.e.
``%WIRESHARK_CONFIG_DIR%\\plugins`` or ``%APPDATA%\\Wireshark\\plugins``.
"""

import os
import shutil
import subprocess
import sys

from .generate import generate

PLUGIN_NAME = "rtrs.lua"


def _from_tshark(tshark="tshark"):
    """'Personal Lua Plugins' of ``tshark -G folders``, or None."""
    exe = shutil.which(tshark)
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "-G", "folders"], capture_output=True, text=True,
                             timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Personal Lua Plugins" and value.strip():
            return value.strip()
    return None


def computed_plugin_dir(environ=None, platform=None):
    """The personal Lua plugin folder without asking Wireshark."""
    environ = os.environ if environ is None else environ
    platform = platform or sys.platform
    if platform.startswith("win"):
        conf = environ.get("WIRESHARK_CONFIG_DIR")
        if not conf:
            conf = os.path.join(environ.get("APPDATA", os.path.expanduser("~")), "Wireshark")
        return os.path.join(conf, "plugins")
    home = environ.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, ".local", "lib", "wireshark", "plugins")


def plugin_dir(ask_tshark=True):
    """Folder Wireshark loads personal Lua plugins from."""
    found = _from_tshark() if ask_tshark else None
    return found or computed_plugin_dir()


def install(directory=None, ask_tshark=True):
    """Write the freshly generated dissector; return the file's path."""
    directory = directory or plugin_dir(ask_tshark)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, PLUGIN_NAME)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(generate())
    return path
