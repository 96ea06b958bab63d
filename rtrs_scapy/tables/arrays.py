"""numpy columns as Arrow arrays, for the tables built from columns (``ios``,
``messages``): no Python per row, only per distinct value.  A column of a few
distinct texts (names, operations, errnos) is an Arrow dictionary array: each row's
index into the texts, which Parquet's writer takes with their dictionary as they are
(encoding.py), rather than a text per row that it hashes again."""

import numpy as np
import pyarrow as pa

from ..engine.distinct import distinct_inverse

#: the type of a column of a few distinct texts: each row an index into them
TEXTS = pa.dictionary(pa.int32(), pa.string())


def nullable(values, missing):
    """A numpy column as Arrow, null where ``missing``."""
    return pa.array(values, mask=missing)


def lookup(texts, codes):
    """``texts[codes]`` (an Arrow string array; codes in range) as a column of texts."""
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)), texts)


def repeated(text, rows, missing=None):
    """``text`` on each of ``rows`` rows, null where ``missing``."""
    return Texts([text]).take(np.zeros(rows, dtype=np.int64), missing)


def by_key(keys, name, missing=None):
    """``name(key)`` per row as a column of texts, computed once per distinct key;
    null where ``missing``.  Also the names by key."""
    uniq, inverse = distinct_inverse(keys)
    values = [name(k) for k in uniq.tolist()]
    return taken(values, inverse.reshape(-1), missing), dict(zip(uniq.tolist(), values))


def taken(texts, index, missing=None):
    """Each row the text of ``texts`` its index names, null where that text is None
    or where ``missing``."""
    return Texts(texts).take(index, missing)


#: texts beyond which a column's dictionary keeps only the texts its rows name: Parquet
#: writes a row group's dictionary whole, and of thousands of sessions' names a row
#: group names a few
WHOLE_DICTIONARY = 256


class Texts:
    """Texts (None: a null) that rows name by index, made once for many batches."""

    def __init__(self, texts):
        distinct = {}
        self.codes = np.array([-1 if text is None else distinct.setdefault(text, len(distinct))
                               for text in texts], dtype=np.int32)
        self.texts = list(distinct)
        self.dictionary = pa.array(self.texts, pa.string())

    def take(self, index, missing=None):
        """The column of rows naming these texts by ``index``."""
        chosen = self.codes[index]
        null = chosen < 0 if missing is None else (chosen < 0) | missing
        dictionary = self.dictionary
        if len(dictionary) > WHOLE_DICTIONARY:
            used = np.flatnonzero(np.bincount(chosen[~null], minlength=len(dictionary)))
            place = np.zeros(len(dictionary), dtype=np.int32)
            place[used] = np.arange(len(used), dtype=np.int32)
            chosen = place[np.maximum(chosen, 0)]
            dictionary = pa.array([self.texts[k] for k in used.tolist()], pa.string())
        return pa.DictionaryArray.from_arrays(pa.array(chosen, mask=null if null.any() else None),
                                              dictionary)


def strings(written, valid=None):
    """The line writer's texts of a batch (engine/text.py: its bytes and where each
    row ends) as an Arrow string array, null where not ``valid``."""
    data, ends = written
    validity = None if valid is None or valid.all() else \
        pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.StringArray.from_buffers(len(ends) - 1, pa.py_buffer(ends.astype(np.int32)),
                                       pa.py_buffer(data), validity)
