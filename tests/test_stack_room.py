"""The commands run with room beneath them on the interpreter's frame stack
(rtrs_scapy/cli STACK_ROOM): a loop of calls deep in a command maps no stack chunk
per call, as one at the end of a 16 KiB chunk does on CPython before 3.13."""

import resource
import sys

from click.testing import CliRunner

from conftest import real_pcap
from rtrs_scapy.cli import _on_one_stack_chunk, main

CALLS = 200          # calls of a loop at one depth
DEPTHS = 600         # depths probed: several 16 KiB chunks of ``descend`` frames


def _leaf():
    return None


# a frame larger than ``descend``'s: where ``descend`` still fits at the end of a chunk
# and the leaf does not, every call of the leaf starts a chunk of its own
_leaf.__code__ = _leaf.__code__.replace(co_stacksize=_leaf.__code__.co_stacksize + 64)


def _faults(depth):
    """Minor page faults of CALLS calls of the leaf made ``depth`` frames down."""
    def descend(n):
        if n:
            return descend(n - 1)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(CALLS):
            _leaf()
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    return descend(depth)


def _thrashing_depths():
    """The depths whose loop faulted in about a page per call (a chunk mapped per call)."""
    return [depth for depth in range(DEPTHS) if _faults(depth) >= CALLS // 2]


def test_no_stack_chunk_is_mapped_per_call_beneath_the_commands():
    assert _on_one_stack_chunk(_thrashing_depths, (), {}) == []
    if sys.version_info < (3, 13):     # the probe finds what the room avoids
        assert _thrashing_depths()


def test_a_command_returns_and_fails_through_the_room(tmp_path):
    result = CliRunner().invoke(main, ["summary", "-q", str(real_pcap("basic_inval"))])
    assert result.exit_code == 0 and "session" in result.output
    missing = CliRunner().invoke(main, ["summary", str(tmp_path / "none.pcap")])
    assert missing.exit_code == 1
    assert _on_one_stack_chunk(lambda a, b=0: a + b, (1,), {"b": 2}) == 3
