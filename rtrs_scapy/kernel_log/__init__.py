"""The kernel's log beside the capture (docs/kernel-log.md).

``read_log(path)`` keeps the RTRS/RNBD lines of a dmesg, ``dmesg -T``,
``journalctl -k -o short-precise`` or serial console file; ``merge(summary,
logs)`` finds each log's clock offset from events both show, puts the lines in
capture time into the paths' timelines and learns the client's device names
(rnbd0) from them.
"""

from .lines import KernelLog, read_log
from .merge import merge

__all__ = ["KernelLog", "merge", "read_log"]
