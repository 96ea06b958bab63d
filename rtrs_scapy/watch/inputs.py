"""Where the packets come from: a capture file, standard input, or an interface
captured by ``tcpdump`` (else ``dumpcap``) writing pcap to a pipe.

A pipe is read as its bytes arrive (``open_capture(..., live=True)``); a
capture tool that cannot start (missing, no permission, no such interface)
gives a one-line message with what to do, not a silent empty stream.
"""

import os
import shutil
import subprocess
import threading

from ..capture import CaptureError, open_capture

#: the default capture filter of ``-i``: RoCEv2 and RoCEv1 (an Ethernet link)
ROCE_FILTER = "udp port 4791 or ether proto 0x8915"
PERMISSION_HINT = ("capturing needs root, or the capabilities cap_net_raw and cap_net_admin "
                   "(e.g. sudo setcap cap_net_raw,cap_net_admin=eip $(command -v %s))")


class WatchError(Exception):
    """The input cannot be read: the message says why."""


class Input:
    """One source of packets; ``open()`` may block until the first bytes arrive."""

    def __init__(self, name, path, live):
        self.name, self.path, self.live = name, path, live

    def open(self):
        try:
            return open_capture(self.path, live=self.live)
        except CaptureError as exc:
            raise WatchError(str(exc).replace(self.path, self.name, 1)) from None

    def close(self):
        pass


def file_input(path):
    return Input(path, path, live=False)


def stdin_input(fd=0):
    """Standard input (``fd``: where it was moved when the terminal took fd 0)."""
    return Input("standard input", "-" if fd == 0 else "/dev/fd/%d" % fd, live=True)


class ToolInput(Input):
    """An interface, captured by a tool that writes pcap to our pipe."""

    def __init__(self, iface, capture_filter=ROCE_FILTER, tools=("tcpdump", "dumpcap")):
        super().__init__("interface %s" % iface, None, live=True)
        self.iface, self.filter = iface, capture_filter
        self.tool = next((t for t in tools if shutil.which(t)), None)
        if self.tool is None:
            raise WatchError("-i %s: neither %s found; install one (apt-get install tcpdump) "
                             "or pipe a capture in: tcpdump -U -w - ... | rtrs-dissect watch -"
                             % (iface, " nor ".join(tools)))
        self.proc = None
        self.stderr = []

    def argv(self):
        if self.tool == "tcpdump":
            argv = ["tcpdump", "-i", self.iface, "-U", "-s", "0", "-w", "-"]
        else:
            argv = ["dumpcap", "-i", self.iface, "-q", "-P", "-s", "0", "-w", "-"]
            if self.filter:
                argv += ["-f", self.filter]
            return argv
        return argv + ([self.filter] if self.filter else [])

    def open(self):
        try:
            self.proc = subprocess.Popen(self.argv(), stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        except OSError as exc:
            raise WatchError("-i %s: cannot run %s: %s" % (self.iface, self.tool,
                                                           exc.strerror or exc)) from None
        self.drain = threading.Thread(target=self._drain, daemon=True)
        self.drain.start()
        self.path = "/dev/fd/%d" % self.proc.stdout.fileno()
        try:
            return super().open()
        except WatchError:
            raise WatchError(self._failure()) from None

    def _drain(self):
        """The tool's messages (kept for the error text; the last few lines)."""
        for line in self.proc.stderr:
            self.stderr = (self.stderr + [line.decode(errors="replace").strip()])[-5:]

    def _failure(self):
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        self.drain.join(5)
        said = " ".join(line for line in self.stderr if line) or "no output"
        text = "-i %s: %s exited (%s): %s" % (self.iface, self.tool, code, said)
        lowered = said.lower()
        if "permission" in lowered or "not permitted" in lowered:
            text += "; " + PERMISSION_HINT % self.tool
        return text

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def detach_stdin():
    """Standard input carries the capture and the keyboard is needed on fd 0 (the
    terminal view): move the stream to another descriptor and put the terminal on
    fd 0.  Returns the stream's descriptor."""
    moved = os.dup(0)
    tty = os.open("/dev/tty", os.O_RDONLY)
    os.dup2(tty, 0)
    os.close(tty)
    return moved
