"""tables/arrays.py: a column of a few texts named by index, an Arrow dictionary of
them, reads as Arrow's own ``take`` of those texts, nulls included."""

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from rtrs_scapy.tables.arrays import TEXTS, WHOLE_DICTIONARY, Texts, by_key, repeated, taken

texts = st.lists(st.one_of(st.none(), st.text(max_size=40)), min_size=1, max_size=8)


@settings(max_examples=200, deadline=None)
@given(texts, st.data())
def test_taken_is_arrows_take(values, data):
    rows = data.draw(st.integers(0, 300))
    index = np.array(data.draw(st.lists(st.integers(0, len(values) - 1), min_size=rows,
                                        max_size=rows)), dtype=np.int64)
    missing = np.array(data.draw(st.lists(st.booleans(), min_size=rows, max_size=rows)),
                       dtype=bool)
    expected = pa.array(values, pa.string()).take(pa.array(index, mask=missing))
    got = taken(values, index, missing)
    assert got.type == TEXTS
    assert got.dictionary_decode().equals(expected)
    assert got.to_pylist() == expected.to_pylist()
    # each text once in the dictionary: Parquet's dictionary page is the distinct texts
    dictionary = got.dictionary.to_pylist()
    assert sorted(dictionary) == sorted({v for v in values if v is not None})


def test_repeated_is_one_text_on_every_row():
    column = repeated("load.pcap", 4)
    assert column.type == TEXTS
    assert column.to_pylist() == ["load.pcap"] * 4
    assert column.dictionary.to_pylist() == ["load.pcap"]


def test_one_set_of_texts_serves_batches_of_any_length():
    names = Texts(["lab1", None, "a-much-longer-session-name" * 8])
    for rows in (1, 5000, 3):
        index = np.arange(rows) % 3
        assert names.take(index).to_pylist() == [["lab1", None, "a-much-longer-session-name" * 8]
                                                 [i] for i in index]


def test_by_key_names_each_distinct_key_once():
    calls = []

    def name(key):
        calls.append(key)
        return None if key == 0 else "errno %d" % key
    column, named = by_key(np.array([5, 0, 5, 7, 7]), name, np.array([0, 0, 0, 1, 0], bool))
    assert column.to_pylist() == ["errno 5", None, "errno 5", None, "errno 7"]
    assert sorted(calls) == [0, 5, 7]
    assert named == {0: None, 5: "errno 5", 7: "errno 7"}


def test_a_column_of_few_of_many_texts_keeps_those_in_its_dictionary():
    """Of thousands of sessions' names a row group names a few: Parquet writes its
    dictionary whole, so it holds those alone."""
    names = Texts(["session %d" % k for k in range(WHOLE_DICTIONARY * 4)] + [None])
    index = np.array([7, 900, 7, len(names.codes) - 1, 3], dtype=np.int64)
    column = names.take(index, np.array([0, 0, 0, 0, 1], dtype=bool))
    assert column.to_pylist() == ["session 7", "session 900", "session 7", None, None]
    assert sorted(column.dictionary.to_pylist()) == ["session 7", "session 900"]
