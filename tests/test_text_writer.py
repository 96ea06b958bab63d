"""The compiled line writer (engine/text.py): numbers as Python prints them, floats as
their repr wherever it says it writes it, guards, the batch's own texts and whole
lines, and lines that do not fit the buffer at once."""

import numpy as np
from hypothesis import given, strategies as st

from rtrs_scapy.engine import text
from rtrs_scapy.engine.text import Pool, Template, exact_decimals, fixed_decimals, \
    shortest_decimals

INT64 = st.integers(-2 ** 63, 2 ** 63 - 1)


def written_where(step, places, n, ok):
    """The lines a template of one ``step`` (decimal, fixed) of ``places`` writes of the
    numbers ``n`` where ``ok``."""
    t = getattr(Template(Pool()), step)("n", places, when="ok").text("\n")
    return [w for w, o in zip(lines(t, {"n": n, "ok": ok}), ok) if o]


def lines(template, columns, whole=None, texts=()):
    rows = len(next(iter(columns.values()))) if columns else len(whole)
    whole = np.full(rows, -1, dtype=np.int64) if whole is None else np.array(whole)
    return template.write({k: np.asarray(v) for k, v in columns.items()}, whole,
                          list(texts)).decode().split("\n")[:-1]


@given(st.lists(INT64, min_size=1, max_size=50), st.integers(1, 20))
def test_numbers_are_python_s(values, width):
    t = Template(Pool())
    t.number("v").text(" ").number("v", or_null=True).text(" ").padded("u", width)
    t.text(" ").number("v", unsigned=True).text("\n")
    unsigned = [v & 0xFFFFFFFFFFFFFFFF for v in values]
    expected = ["%d %s %0*d %d" % (v, v if v >= 0 else "null", width, abs(v) % 2 ** 63, u)
                for v, u in zip(values, unsigned)]
    assert lines(t, {"v": values, "u": [abs(v) % 2 ** 63 for v in values]}) == expected


TIMES = st.floats(0, 2.0 ** 34, allow_nan=False) | st.builds(
    lambda s, us: s + us * 1e-6, st.integers(0, 2 ** 34), st.integers(0, 999999)) | st.builds(
    lambda s, us: (s * 1000000 + us) / 1e6, st.integers(0, 2 ** 33), st.integers(0, 999999))


@given(st.lists(TIMES | st.floats(-1e6, 1e6) | st.floats(2.0 ** 33, 2.0 ** 53) | st.sampled_from(
    [0.0, -0.0, 1e-4, 9.9e-5, 1e-5, 2.0 ** 33, float("nan"), float("inf")]), min_size=1,
    max_size=40), st.integers(0, 7))
def test_a_decimal_is_the_repr_where_it_is_exact(values, places):
    values = np.array(values, dtype=np.float64)
    rounded = np.array([round(v, places) if np.isfinite(v) else v for v in values])
    for column in (values, rounded):
        n, exact = exact_decimals(column, places)
        assert written_where("decimal", places, n, exact) == \
            [repr(float(v)) for v, e in zip(column, exact) if e]
    # what the writer is for: times (to 2106) and latencies in µs, rounded as messages
    # rounds them, are all written here
    below = {6: 2.0 ** 32, 1: 2.0 ** 45}.get(places)
    if below:
        n, exact = exact_decimals(rounded, places)
        assert exact[np.isfinite(rounded) & (np.abs(rounded) >= 1e-4)
                     & (np.abs(rounded) < below)].all()


#: times in ns as seconds (a nanosecond capture's), around and beyond the span the
#: integers cover, and values whose repr is short or ties
NS_TIMES = st.builds(lambda s, ns: (s * 10 ** 9 + ns) / 1e9, st.integers(0, 2 ** 34),
                     st.integers(0, 10 ** 9 - 1)) | st.floats(2.0 ** 22, 2.0 ** 34) | \
    st.builds(lambda s, k: s + k / 2 ** 10, st.integers(2 ** 23, 2 ** 33), st.integers(0, 1023))


@given(st.lists(NS_TIMES | TIMES | st.sampled_from(
    [2.0 ** 23, 2.0 ** 23 - 0.5, 9223372035.5, 9223372036.5, -1795965502.25, float("nan")]),
    min_size=1, max_size=40), st.sampled_from([6, 9]))
def test_the_shortest_decimals_are_the_repr_where_found(values, places):
    values = np.array(values, dtype=np.float64)
    n, found = shortest_decimals(values, places)
    assert written_where("decimal", places, n, found) == \
        [repr(float(v)) for v, f in zip(values, found) if f]


def test_a_nanosecond_capture_s_times_are_found():
    """Nearly every time in ns of this century is written by the writer (the rest: a
    tie or a distance of half a last bit, left to repr), and each as its repr."""
    rng = np.random.default_rng(5)
    ns = rng.integers(946684800 * 10 ** 9, 4102444800 * 10 ** 9, 20000)
    values = ns / 1e9
    n, found = shortest_decimals(values, 9)
    assert found.mean() > 0.999
    assert written_where("decimal", 9, n, found) == \
        [repr(v) for v, f in zip(values.tolist(), found) if f]


@given(st.lists(TIMES | st.floats(-10.0, 1e7) | st.sampled_from(
    [0.0, -0.0, 0.25, 0.05, 2.5, 605.0, float("nan"), float("inf")]), min_size=1,
    max_size=40), st.sampled_from([1, 6]))
def test_fixed_is_percent_f_where_it_is_certain(values, places):
    values = np.array(values, dtype=np.float64)
    n, certain = fixed_decimals(values, places)
    assert written_where("fixed", places, n, certain) == \
        ["%.*f" % (places, v) for v, c in zip(values.tolist(), certain) if c]
    # a time's seconds since the first frame and a latency in µs are written here
    with np.errstate(invalid="ignore"):
        whole = values * 10 ** places % 1 == 0
    assert certain[(values >= 0) & ~np.signbit(values) & (values < 1e6) & whole].all()


def test_guards_batch_texts_and_whole_lines():
    pool = Pool()
    t = Template(pool)
    t.text("<").text_of("name").text("|", when="bar").text_of("own", batch=True).text(">\n")
    names = [pool.add(name) for name in ("a", "bé")]
    columns = {"name": [names[0], names[1], -1, names[0]], "bar": [True, False, True, False],
               "own": [-1, 1, 0, -1]}
    assert lines(t, columns, whole=[-1, -1, -1, 2], texts=["x", "yz", "whole line\n"]) == \
        ["<a|>", "<béyz>", "<|x>", "whole line"]


def test_lines_longer_than_the_buffer_come_whole(monkeypatch):
    """A batch whose lines outgrow the room made for them (40 bytes, a line a byte)
    comes whole: the room grows, the lines written so far kept."""
    monkeypatch.setattr(text, "LEAST_ROOM", 40)
    pool = Pool()
    t = Template(pool).text("0123456789" * 3).number("v").text("\n")
    t.line_room = 1
    values = list(range(0, 5000, 7))
    assert lines(t, {"v": values}) == ["0123456789" * 3 + str(v) for v in values]
    t.line_room = 1
    data, ends = t.texts({"v": np.array(values)}, np.full(len(values), -1), [])
    data = data.tobytes()
    assert ends[0] == 0 and [data[a:b] for a, b in zip(ends, ends[1:])] == \
        [("0123456789" * 3 + "%d\n" % v).encode() for v in values]
    t.line_room = 1
    long = "x" * 1000 + "\n"
    assert lines(t, {"v": [1, 2]}, whole=[-1, 0], texts=[long]) == \
        ["0123456789" * 3 + "1", "x" * 1000]
