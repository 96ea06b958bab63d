"""The layers load the three ways a Scapy user expects."""

import subprocess
import sys


def run_python(code):
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_star_import():
    out = run_python("from rtrs_scapy import *; print(RtrsMsgConnRsp().queue_depth, "
                     "RnbdMsgIo(rw=0x301).sprintf('%rw%'))")
    assert out.split() == ["512", "0x301", "(WRITE|SYNC|FUA)"]


def test_scapy_extension_and_load_contrib():
    out = run_python(
        "from scapy.config import conf; from scapy.main import load_contrib\n"
        "conf.exts.load('rtrs-scapy'); load_contrib('rtrs')\n"
        "import builtins; print(builtins.RtrsMsgConnReq.__module__)")
    assert out.strip() == "rtrs_scapy.layers.rtrs"


def test_shell_namespace_has_scapy_and_rtrs():
    from rtrs_scapy.cli.shell import layer_namespace as _layer_namespace
    names = _layer_namespace()
    assert {"rdpcap", "Ether", "BTH", "RtrsMsgConnReq", "RnbdMsgIo", "icrc_ok"} <= set(names)
