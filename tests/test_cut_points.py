"""tests/cut_points.py, which chooses where the cut sweeps cut (test_cuts.py,
test_lua_midsession.py, test_cut_outputs.py, test_linking.py): every frame of a capture
is in exactly one situation, the depth of each is what the decode of that very cut finds
(the classifier decodes only where that can change), and a covering has every feature
any cut has, each of its cuts one that no other of them has."""

import pytest

from conftest import real_pcap
from cut_points import covering, features, situations
from ib_decode import decode, ib_frames


@pytest.mark.parametrize("name", ["errors", "discard"])
def test_every_frame_is_in_one_situation_with_the_depth_of_its_own_cut(name):
    pcap = real_pcap(name)
    found = situations(pcap)
    numbers = sorted(f for frames in found.values() for f in frames)
    assert numbers == list(range(1, len(ib_frames(pcap)) + 1))
    for situation, frames in found.items():
        for first in frames:
            assert frozenset(decode(pcap, first).depth.values()) == situation.depth, first


@pytest.mark.parametrize("name", ["basic_inval", "multipath"])
def test_a_covering_has_every_feature_each_cut_one_of_its_own(name):
    pcap = real_pcap(name)
    everything = set().union(*map(features, situations(pcap)))
    cuts = covering(pcap)
    assert set().union(*(features(s) for _first, s in cuts)) == everything
    for first, situation in cuts:
        others = set().union(*(features(s) for f, s in cuts if f != first))
        assert features(situation) - others, first
        assert first == max(situations(pcap)[situation])
