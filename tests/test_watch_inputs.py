"""``watch -i IFACE``: a real capture on the loopback interface through the capture
tool, and a clear message when the tool is missing or lacks the permission."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

from conftest import real_pcap
from watch_util import RTRS_DISSECT, at_a_terminal, summary

ETH_IPV4 = 14
LOOPBACK = {bytes([10, 77, 0, 1]): bytes([127, 0, 0, 1]), bytes([10, 77, 0, 2]): bytes([127, 0, 0, 2])}


def only_venv_path(extra=None):
    """PATH with the venv's bin (and ``extra``) only: no capture tool on it."""
    dirs = ([str(extra)] if extra else []) + [os.path.dirname(sys.executable)]
    return dict(os.environ, PATH=os.pathsep.join(dirs))


def test_missing_capture_tool_says_what_to_do():
    done = subprocess.run([RTRS_DISSECT, "watch", "-i", "eth9", "--jsonl"], capture_output=True,
                          text=True, env=only_venv_path())
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "Error: -i eth9: neither tcpdump nor dumpcap found; install one (apt-get install "
        "tcpdump) or pipe a capture in: tcpdump -U -w - ... | rtrs-dissect watch -"]


def test_capture_without_permission_says_what_to_do(tmp_path):
    """tcpdump's own words when it may not capture, and how to allow it."""
    fake = tmp_path / "tcpdump"
    fake.write_text("#!/bin/sh\necho \"tcpdump: eth9: You don't have permission to capture on "
                    "that device\" >&2\necho \"(socket: Operation not permitted)\" >&2\n"
                    "exit 1\n")
    fake.chmod(0o755)
    done = subprocess.run([RTRS_DISSECT, "watch", "-i", "eth9", "--jsonl"], capture_output=True,
                          text=True, env=only_venv_path(tmp_path))
    assert done.returncode == 1
    message = done.stderr.strip()
    assert message.startswith("Error: -i eth9: tcpdump exited (1): tcpdump: eth9: You don't "
                              "have permission to capture on that device (socket: Operation "
                              "not permitted); capturing needs root, or the capabilities")
    assert "setcap cap_net_raw,cap_net_admin=eip" in message
    assert len(message.splitlines()) == 1


def frames_on_loopback(capture):
    """The capture's Ethernet frames with their IPv4 addresses moved to 127.0.0.x."""
    from rtrs_scapy.capture import open_capture
    out = []
    with open_capture(capture) as cap:
        for _no, _ts, buf, start, end, _link in cap:
            frame = bytearray(buf[start:end])
            for at in (ETH_IPV4 + 12, ETH_IPV4 + 16):
                frame[at:at + 4] = LOOPBACK[bytes(frame[at:at + 4])]
            out.append(bytes(frame))
    return out


def exit_code_or_stacks(proc, readers, said):
    """The child's exit code after SIGINT; if it does not end in 30 s, its signal masks
    and its threads' stacks (faulthandler on SIGABRT) in the failure."""
    try:
        return proc.wait(30)
    except subprocess.TimeoutExpired:
        with open("/proc/%d/status" % proc.pid) as status:
            said[:0] = [line for line in status if line.startswith(("SigBlk", "SigIgn"))]
        proc.send_signal(signal.SIGABRT)
        proc.wait(30)
        for reader in readers:
            reader.join(5)
        raise AssertionError("watch -i lo did not end on SIGINT:\n" + "".join(said)) from None


def test_live_capture_on_loopback():
    """A real capture tool on ``lo``: the RoCE frames of basic_inval sent there
    (addresses moved to 127.0.0.x) are counted as the summary counts the file."""
    tool = shutil.which("tcpdump") or shutil.which("dumpcap")
    assert tool, "scripts/test.sh installs dumpcap (with tshark)"
    capture = real_pcap("basic_inval")
    want = summary(capture)["sessions"][0]["paths"][0]["io"]
    proc = subprocess.Popen(at_a_terminal([RTRS_DISSECT, "watch", "-i", "lo", "--jsonl",
                                           "--filter", "udp port 4791"]), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ, PYTHONFAULTHANDLER="1"))
    lines, said = [], []
    first = threading.Event()

    def read():
        for line in proc.stdout:
            lines.append(json.loads(line))
            first.set()

    def drain():        # stderr read as it comes: a full pipe would block the child
        said.extend(proc.stderr)
    readers = [threading.Thread(target=f, daemon=True) for f in (read, drain)]
    for reader in readers:
        reader.start()
    try:
        assert first.wait(60), "".join(said) if proc.poll() is not None else "no interval"
        with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as raw:
            raw.bind(("lo", 0))
            for k, frame in enumerate(frames_on_loopback(capture)):
                raw.send(frame)
                if k % 50 == 49:
                    time.sleep(0.005)

        def counted():
            return {op: [sum(p[op][k] for i in list(lines) for p in i["paths"])
                         for k in ("count", "bytes")] for op in ("read", "write")}
        expected = {op: [want[op]["count"], want[op]["bytes"]] for op in ("read", "write")}
        deadline = time.monotonic() + 30
        while counted() != expected and time.monotonic() < deadline:
            time.sleep(0.2)
        assert counted() == expected
    finally:
        proc.send_signal(signal.SIGINT)
        code = exit_code_or_stacks(proc, readers, said)
    assert code == 0
    clients = {p["client"] for i in lines for p in i["paths"]}
    assert clients == {"10.77.0.2"}    # named by the RDMA CM header, as in the file
