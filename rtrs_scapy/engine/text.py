"""Lines of text written from columns by compiled code: the bytes of a batch of rows
at once (``messages``' text and JSON lines, ``export``'s JSON columns), where Python's
``%`` would cost microseconds a line.

A line is a :class:`Template`, a list of steps.  Each step writes a piece of text or
a number from one of the batch's integer columns, on the rows where its guard column
is non-zero (every row when it has none):

* ``text``: a fixed piece; ``text_of``: the piece a column names per row (none where
  it is negative), of the template's pool or of the batch's own texts;
* ``number``: the column in decimal, ``null`` where ``or_null`` and negative,
  ``unsigned`` where the column's 64 bits are unsigned; ``padded``: zero-padded to a
  width; ``decimal``: the column N as N / 10**places, trailing zeros dropped but one
  (``1.5``, ``2.0``): Python's repr of that float where it is exact and its repr is
  positional (the caller's to check, :func:`exact_decimals`, :func:`shortest_decimals`);
  ``fixed``: N / 10**places with every decimal, ``%.{places}f`` of the float where
  :func:`fixed_decimals` says so.

Steps added inside ``with template.where(column):`` blocks take every guard around
them; a row that fails a guard skips the steps inside it at once.  A row whose ``whole``
entry is not negative is that text of the batch, the template skipped (the rows the
caller formats in Python).

The loops that write bytes index with unsigned integers: numba gives a signed index
Python's meaning (a negative one counts from the end), a test on every byte that also
keeps the copy from being vectorized; unsigned, the lines are written in half the time
(docs/benchmarks.md).
"""

import contextlib

import numpy as np

from ..capture.jit import byte_array, compiled, helper
from .distinct import distinct_inverse

TEXT, TEXT_OF, NUMBER, NUMBER_OR_NULL, UNSIGNED, PADDED, DECIMAL, FIXED = range(8)
#: a step's guard when it has none
ALWAYS = -1
#: a text_of step's texts: the template's pool or the batch's own
POOL, BATCH = 0, 1
_NULL = np.frombuffer(b"null", dtype=np.uint8)
#: 10**k for k = 0…19 (a 64-bit unsigned number has up to 20 digits)
_TENS = np.array([10 ** k for k in range(20)], dtype=np.uint64)
#: "00" to "99": the two digits of each number below a hundred
_PAIRS = np.frombuffer("".join("%02d" % k for k in range(100)).encode(), dtype=np.uint8)
#: the most a number step writes: a sign, 20 digits, a point and up to 18 decimals (or a
#: width of as many)
NUMBER_ROOM = 48
#: the room per line of a template's first batch (later: the last batch's mean line and
#: a quarter more, so that a batch's room holds its text, not its longest line's worth)
FIRST_LINE_ROOM = 512
#: the least room of a batch's text
LEAST_ROOM = 1 << 16


class Pool:
    """Texts as UTF-8 bytes, each kept once, numbered in the order they came."""

    def __init__(self):
        self.data = np.zeros(1 << 12, dtype=np.uint8)
        self.bounds = [0]
        self.index = {}

    def add(self, text):
        """The number of ``text`` in the pool."""
        found = self.index.get(text)
        if found is None:
            raw = text.encode()
            end = self.bounds[-1] + len(raw)
            if end > len(self.data):
                self.data = np.concatenate([self.data, np.zeros(max(end, len(self.data)),
                                                                dtype=np.uint8)])
            self.data[self.bounds[-1]:end] = np.frombuffer(raw, dtype=np.uint8)
            self.bounds.append(end)
            found = self.index[text] = len(self.bounds) - 2
        return found

    def add_all(self, texts):
        """The numbers of ``texts``, an array."""
        return np.array([self.add(text) for text in texts], dtype=np.int64)

    def add_each(self, values, text):
        """The number of ``text(v)`` for each of ``values``, worked out once per
        distinct value."""
        unique, inverse = distinct_inverse(values)
        return self.add_all(text(v) for v in unique.tolist())[inverse.reshape(-1)]

    def arrays(self):
        """The bytes and the bounds of every text (text k is bytes[bounds[k]:bounds[k+1]])."""
        return byte_array(self.data[:self.bounds[-1]]), np.array(self.bounds, dtype=np.int64)


def texts_arrays(texts):
    """A batch's own texts (a list of str) as :meth:`Pool.arrays` gives a pool's."""
    raw = [text.encode() for text in texts]
    bounds = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in raw], out=bounds[1:])
    return byte_array(b"".join(raw)), bounds


class Template:
    """The steps of a line over named columns; its fixed texts in ``pool``."""

    def __init__(self, pool):
        self.pool = pool
        self.steps = []
        self.columns = {}   # the columns of numbers and texts: name -> row of the table
        self.flags = {}     # the guard columns (boolean): name -> row of the flags
        self.guard = ()
        self.both = {}      # a guard column made of several: its columns
        self.guards = set()
        self.nesting = []   # per step, the guards around it, outermost first
        self.step_rows = None   # the steps as an array (_steps_table)
        self.line_room = FIRST_LINE_ROOM     # room per line of the next batch (bytes)

    @contextlib.contextmanager
    def where(self, column):
        """The steps added inside: on the rows where ``column`` is non-zero (and the
        guards around, if any)."""
        outer = self.guard
        self.guard = outer + (column,)
        try:
            yield self
        finally:
            self.guard = outer

    def _step(self, kind, a, b, when):
        guards = self.guard + ((when,) if when is not None else ())
        self.guards.update(guards)
        if not guards:
            guard = ALWAYS
        elif len(guards) == 1:
            guard = self.flags.setdefault(guards[0], len(self.flags))
        else:
            name = " & ".join(guards)
            self.both[name] = guards
            guard = self.flags.setdefault(name, len(self.flags))
        self.steps.append((kind, a, b, guard))
        self.nesting.append(guards)
        return self

    def _column(self, name):
        return self.columns.setdefault(name, len(self.columns))

    def text(self, text, when=None):
        return self._step(TEXT, self.pool.add(text), POOL, when)

    def text_of(self, column, when=None, batch=False):
        return self._step(TEXT_OF, self._column(column), BATCH if batch else POOL, when)

    def number(self, column, when=None, or_null=False, unsigned=False):
        kind = NUMBER_OR_NULL if or_null else UNSIGNED if unsigned else NUMBER
        return self._step(kind, self._column(column), 0, when)

    def padded(self, column, width, when=None):
        if not 0 < width < NUMBER_ROOM:
            raise ValueError("a padded number of %d digits" % width)
        return self._step(PADDED, self._column(column), width, when)

    def decimal(self, column, places, when=None):
        return self._step(DECIMAL, self._column(column), places, when)

    def fixed(self, column, places, when=None):
        """The column N as N / 10**places with all its decimals (``%.{places}f``)."""
        return self._step(FIXED, self._column(column), places, when)

    def write(self, columns, whole, texts):
        """The lines of a batch as bytes.  ``columns``: name → integer array (one
        entry per row); ``whole``: per row, the batch text that is its whole line, or
        -1; ``texts``: the batch's own texts (``text_of(..., batch=True)``, ``whole``)."""
        return self.texts(columns, whole, texts)[0].tobytes()

    def _steps_table(self):
        """The steps as rows (kind, a, b, guard, past): ``past`` is the first step after
        it that its guard does not hold, where a row that fails the guard goes on (the
        steps in between are inside it: their guards hold it and more)."""
        if self.step_rows is None or len(self.step_rows) != len(self.steps):
            nesting, past = self.nesting, []
            for s, guards in enumerate(nesting):
                after = s + 1
                while guards and after < len(nesting) and \
                        nesting[after][:len(guards)] == guards:
                    after += 1
                past.append(after)
            table = np.zeros((len(self.steps), 5), dtype=np.int64)
            table[:, :4] = np.array(self.steps, dtype=np.int64).reshape(-1, 4)
            table[:, 4] = past
            self.step_rows = table
        return self.step_rows

    def texts(self, columns, whole, texts):
        """:meth:`write`'s bytes (a uint8 array of its own, written in place: no copy
        of a batch's text), and where each row's text ends in them (a string column's
        offsets, after a 0)."""
        rows = len(whole)
        mistaken = [name for name in self.guards if columns[name].dtype != np.bool_]
        if mistaken:    # a guard's name given to a number too
            raise TypeError("guard columns not boolean: %s" % ", ".join(sorted(mistaken)))
        # a column's values side by side, each column copied as it comes (filled row by
        # row, every value of a column lands a row's width from the last: six times the
        # time, docs/benchmarks.md); the guards a byte each
        table = np.empty((len(self.columns), rows), dtype=np.int64)
        for name, k in self.columns.items():
            table[k] = columns[name]
        flags = np.empty((len(self.flags), rows), dtype=np.bool_)
        for name, k in self.flags.items():
            first, *rest = self.both.get(name, (name,))     # (boolean, checked above)
            flags[k] = columns[first]
            for other in rest:
                np.logical_and(flags[k], columns[other], out=flags[k])
        steps = self._steps_table()
        pool, bounds = self.pool.arrays()
        batch, batch_bounds = texts_arrays(texts)
        whole = np.ascontiguousarray(whole, dtype=np.int64)
        ends = np.zeros(rows + 1, dtype=np.int64)
        # room for the batch at the last batch's lines: grown (twice, the lines so
        # far kept) in the rare batch whose lines are longer
        out = np.empty(max(rows * self.line_room, LEAST_ROOM), dtype=np.uint8)
        row = written = 0
        while row < rows:
            first = row
            row, end = write_lines(steps, table, flags.view(np.uint8), whole, pool, bounds,
                                   batch, batch_bounds, out[written:], row, ends[1:])
            ends[first + 1:row + 1] += written
            written += end
            if row < rows:
                grown = np.empty(2 * len(out), dtype=np.uint8)
                grown[:written] = out[:written]
                out = grown
        if rows:
            self.line_room = written * 5 // (4 * rows) + 1
        return out[:written], ends


def warm_up():
    """One line written, so that :func:`write_lines` is compiled for the types
    :meth:`Template.write` gives it."""
    Template(Pool()).text("compiled").write({}, np.full(1, -1, dtype=np.int64), [])


def exact_decimals(values, places):
    """N = values × 10**places as integers, and where ``decimal`` writes Python's repr
    of the value: the value is the float nearest N / 10**places, no other text of
    ``places`` decimals is (the floats there are closer together than those texts),
    N is exact (below 2**53), and the repr is positional (from 1e-4 on, or zero
    without a sign).  A float's repr is the shortest text that reads back as it."""
    scale = 10 ** places
    with np.errstate(invalid="ignore", over="ignore"):
        n = np.rint(values * scale)
        magnitude = np.abs(values)
        exact = (n / scale == values) & (np.abs(n) < 2.0 ** 53) & (
            ((magnitude >= 1e-4) & (np.spacing(magnitude) < 1.0 / scale))
            | ((values == 0) & ~np.signbit(values)))
    return np.where(exact, n, 0).astype(np.int64), exact


def shortest_decimals(values, places):
    """:func:`exact_decimals`, and also where a value lies between ``places``-decimal
    numbers (a time in ns as seconds: 1795965502.3865511) and its repr has at most
    ``places`` decimals: there N is that repr's digits, found in integers
    (:func:`_shortest_fractions`) for the values from 2**23 to those whose N nears
    2**63; the others are left to the caller."""
    n, exact = exact_decimals(values, places)
    with np.errstate(invalid="ignore"):
        between = ~exact & (values >= 2.0 ** 23) & (values < 2 ** 63 // 10 ** places - 1)
    at = np.flatnonzero(between)
    if len(at):
        whole = np.floor(values[at])
        fraction, found = _shortest_fractions(values[at], whole, places)
        n[at] = np.where(found, whole.astype(np.int64) * 10 ** places + fraction, 0)
        exact[at] = found
    return n, exact


def _shortest_fractions(values, whole, places):
    """Of each value, its fraction as the shortest decimals (up to ``places``) that read
    back as the value, scaled to ``places`` decimals, and where that is certain.
    Python's repr is the shortest decimal text that reads back as the float, the
    nearest one of its length.  From 2**23 on, a value's last bit is 2**-shift with
    shift at most 29, so its fraction is k last bits (exact: the value less its whole
    part); with q decimals the nearest is f = k * 10**q / 2**shift rounded, and it
    reads back where it lies within half a last bit: |f * 2**shift - k * 10**q| * 2 <
    10**q, every term below 2**60.  A tie between two nearest, or a distance of just
    half a last bit (read back by rounding to even), leaves the value uncertain."""
    _, exponent = np.frexp(values)
    shift = 53 - exponent.astype(np.int64)
    k = np.ldexp(values - whole, shift).astype(np.int64)
    half = np.left_shift(np.int64(1), shift - 1)
    fraction = np.zeros(len(values), dtype=np.int64)
    found = np.zeros(len(values), dtype=bool)
    uncertain = np.zeros(len(values), dtype=bool)
    for q in range(1, places + 1):
        scaled = k * 10 ** q
        f = np.right_shift(scaled, shift)
        rest = scaled - np.left_shift(f, shift)
        f += rest > half
        off = np.abs(np.left_shift(f, shift) - scaled) * 2
        pending = ~found & ~uncertain
        uncertain |= pending & ((rest == half) | (off == 10 ** q))
        now = pending & ~uncertain & (off < 10 ** q)
        fraction[now] = f[now] * 10 ** (places - q)
        found |= now
    return fraction, found & ~uncertain


def fixed_decimals(values, places):
    """N = values × 10**places rounded as ``%.{places}f`` rounds (the float's exact value,
    half to even), and where that is certain: not negative (nor -0.0), the product
    below 2**43 (its rounding error under 2**-10), not within 2e-3 of a half."""
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = values * 10.0 ** places
        n = np.rint(scaled)
        certain = (values >= 0) & ~np.signbit(values) & (scaled < 2.0 ** 43) \
            & (np.abs(scaled - np.floor(scaled) - 0.5) > 2e-3)
    return np.where(certain, n, 0).astype(np.int64), certain


@compiled
def write_lines(steps, columns, flags, whole, pool, bounds, batch, batch_bounds, out, row, ends):
    """The lines of rows ``row``… into ``out`` while each fits whole, each one's end in
    ``ends``; returns the next row and the bytes written.  ``columns``: the template's
    columns of numbers and texts, a row each (``columns[k, row]``); ``flags`` its guard
    columns, a byte a value.  (One loop, its copies
    written out: a helper call that takes the arrays costs more than the bytes it
    writes.)"""
    at, size, last = 0, out.shape[0], steps.shape[0]
    while row < whole.shape[0]:
        start, w = at, whole[row]
        s = -1 if w >= 0 else 0     # -1: the batch's whole line
        while s < last:
            if s < 0:
                src, first, end = batch, batch_bounds[w], batch_bounds[w + 1]
                s = last
            else:
                kind, a, b, guard = steps[s, 0], steps[s, 1], steps[s, 2], steps[s, 3]
                if guard >= 0 and flags[guard, row] == 0:
                    s = steps[s, 4]         # past the steps inside the guard
                    continue
                s += 1
                if kind != TEXT and kind != TEXT_OF:
                    if at + NUMBER_ROOM > size:
                        return row, start
                    at = _number(out, at, kind, columns[a, row], b)
                    continue
                entry = a if kind == TEXT else columns[a, row]
                if entry < 0:
                    continue
                if kind == TEXT_OF and b == BATCH:
                    src, first, end = batch, batch_bounds[entry], batch_bounds[entry + 1]
                else:
                    src, first, end = pool, bounds[entry], bounds[entry + 1]
            if at + end - first > size:
                return row, start
            to, count = np.uint64(at), np.uint64(end - first)
            for k in range(count):      # unsigned indices (module docstring)
                out[to + k] = src[np.uint64(first) + k]
            at += end - first
        ends[row] = at
        row += 1
    return row, at


@helper
def _number(out, at, kind, value, b):
    """A number step's text of ``value`` (room for it checked)."""
    if kind == NUMBER_OR_NULL and value < 0:
        for k in range(4):
            out[at + k] = _NULL[k]
        return at + 4
    if kind == UNSIGNED:
        return _digits(out, at, np.uint64(value), 1)
    if kind == DECIMAL or kind == FIXED:
        return _decimal(out, at, value, b, kind == DECIMAL)
    if value < 0:
        out[at] = 45    # "-"
        at += 1
        value = -value
    return _digits(out, at, np.uint64(value), b if kind == PADDED else 1)


@helper
def _digits(out, at, value, width):
    """``value`` in decimal, at least ``width`` digits (zeros before): its digits
    counted against the powers of ten, then written two at a division."""
    count = 1
    while count < _TENS.shape[0] and value >= _TENS[count]:
        count += 1
    count = max(count, width)
    first = k = np.uint64(at)
    k += np.uint64(count)
    two = np.uint64(2)
    while value >= np.uint64(100):      # unsigned indices (module docstring)
        pair = value % np.uint64(100) * two
        value //= np.uint64(100)
        k -= two
        out[k] = _PAIRS[pair]
        out[k + np.uint64(1)] = _PAIRS[pair + np.uint64(1)]
    if value >= np.uint64(10):
        k -= two
        out[k] = _PAIRS[value * two]
        out[k + np.uint64(1)] = _PAIRS[value * two + np.uint64(1)]
    else:
        k -= np.uint64(1)
        out[k] = 48 + value
    while k > first:                    # the zeros of a padded number
        k -= np.uint64(1)
        out[k] = 48
    return at + count


@helper
def _decimal(out, at, value, places, strip):
    """N / 10**places: the whole part, a point, the decimals (``strip``: without
    trailing zeros, one at least)."""
    scale = 1
    for _ in range(places):
        scale *= 10
    if value < 0:
        out[at] = 45    # "-"
        at += 1
        value = -value
    at = _digits(out, at, np.uint64(value // scale), 1)
    out[at] = 46    # "."
    fraction, width = value % scale, places
    while strip and width > 1 and fraction % 10 == 0:
        fraction //= 10
        width -= 1
    return _digits(out, at + 1, np.uint64(fraction), width)
