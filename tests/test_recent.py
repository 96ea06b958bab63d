"""engine/recent.py against the rule written with Python lists: per key, the last
``depth`` (frame, value) items in the order they came; a take finds the latest frame
before its own (the first of equals) and removes it."""

from hypothesis import given, settings
from hypothesis import strategies as st

from rtrs_scapy.engine.recent import SPREAD, Recent

DEPTH = 3

keys = st.sampled_from([0, 7, 1 << 31, (1 << 32) - 1])
adds = st.lists(st.tuples(keys, st.integers(0, 40), st.integers(0, 1 << 40)), max_size=12)
takes = st.lists(st.tuples(keys, st.integers(0, 45)), max_size=12)


def _hold(held, key, frame, value):
    """The rule with lists: an item appended to its key's, the oldest beyond DEPTH gone."""
    items = held.setdefault(key, [])
    items.append((frame, value))
    del items[:-DEPTH]


def _take(held, key, frame):
    """The rule with lists: the value of the key's latest item before ``frame`` (the
    first of equals), taken out; -1 where none."""
    latest = None
    for item in held.get(key, ()):
        if item[0] < frame and (latest is None or item[0] > latest[0]):
            latest = item
    if latest is None:
        return -1
    held[key].remove(latest)
    return latest[1]


def _by_lists(steps):
    held, out = {}, []
    for kind, batch in steps:
        if kind == "add":
            for item in batch:
                _hold(held, *item)
        else:
            out += [_take(held, key, frame) for key, frame in batch]
    return out, sum(len(items) for items in held.values())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.tuples(st.just("add"), adds), st.tuples(st.just("take"), takes)),
                max_size=10))
def test_recent_keeps_the_rule_of_lists(steps):
    recent, out = Recent(depth=DEPTH, rows=1), []
    for kind, batch in steps:
        if kind == "add":
            recent.play([k for k, _, _ in batch], [f for _, f, _ in batch],
                        [v for _, _, v in batch], (), ())
        else:
            out += recent.play((), (), (), [k for k, _ in batch],
                               [f for _, f in batch]).tolist()
    assert (out, len(recent)) == _by_lists(steps)


def test_a_key_never_added_has_nothing():
    recent = Recent()
    recent.play([5], [10], [99], (), ())
    assert recent.play((), (), (), [6, 5, 5], [20, 20, 20]).tolist() == [-1, 99, -1]


many_keys = st.integers(0, 300).map(lambda k: k * 7919 - (1 << 20))
many_adds = st.lists(st.tuples(many_keys, st.integers(0, 40), st.integers(0, 1 << 40)),
                     min_size=1, max_size=40)
many_takes = st.lists(st.tuples(many_keys, st.integers(0, 45)), max_size=40)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.tuples(st.just("add"), many_adds),
                          st.tuples(st.just("take"), many_takes)), max_size=30))
def test_keys_arriving_batch_after_batch_keep_the_rule_and_few_levels(steps):
    """Hundreds of keys, new ones in most batches: the sorted levels they are kept in
    split and merge, and a key is found in whichever holds it; each level is at least
    SPREAD times the next, so they are few (a logarithm of the keys)."""
    recent, out, added = Recent(depth=DEPTH, rows=1), [], set()
    for kind, batch in steps:
        if kind == "add":
            recent.play([k for k, _, _ in batch], [f for _, f, _ in batch],
                        [v for _, _, v in batch], (), ())
            added.update(k for k, _, _ in batch)
            sizes = [len(keys) for keys, _ in recent.levels]
            assert sum(sizes) == recent.known == len(added)
            assert all(older >= SPREAD * newer for older, newer in zip(sizes, sizes[1:]))
        else:
            out += recent.play((), (), (), [k for k, _ in batch],
                               [f for _, f in batch]).tolist()
    assert (out, len(recent)) == _by_lists(steps)


def _played_by_lists(items, takes):
    """Recent.play's rule with lists: each take after the items of earlier frames."""
    held, out, pending = {}, [], list(items)
    for key, frame in takes:
        while pending and pending[0][1] < frame:
            _hold(held, *pending.pop(0))
        out.append(_take(held, key, frame))
    for item in pending:
        _hold(held, *item)
    return out, sum(len(items) for items in held.values())


@settings(max_examples=300, deadline=None)
@given(adds.map(lambda items: sorted(items, key=lambda item: item[1])),
       takes.map(lambda batch: sorted(batch, key=lambda take: take[1])))
def test_items_and_takes_played_together_go_in_frame_order(items, batch):
    """A batch's READs and invalidations together: a key read more than ``depth`` times
    in the batch keeps the reads its takes are for."""
    recent = Recent(depth=DEPTH, rows=1)
    out = recent.play([k for k, _, _ in items], [f for _, f, _ in items],
                      [v for _, _, v in items], [k for k, _ in batch], [f for _, f in batch])
    assert (out.tolist(), len(recent)) == _played_by_lists(items, batch)


def test_a_take_finds_its_read_among_later_reads_of_its_key():
    """Ten reads of one key, each invalidated before the next: all found, though a row
    holds three."""
    recent = Recent(depth=DEPTH, rows=1)
    out = recent.play([5] * 10, list(range(0, 100, 10)), list(range(10)),
                      [5] * 10, list(range(5, 105, 10)))
    assert out.tolist() == list(range(10)) and len(recent) == 0
