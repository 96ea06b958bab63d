"""The engine is compiled when the package is built or installed, not on the user's
first capture (rtrs_scapy/capture/jit.py, docs/install.md).

The wheel is built as ``pip install .`` builds it (setup.py compiles into it),
installed, and run from a read-only mount with no home folder: the first summary
loads the shipped code (numba's own cache log says from where) and compiles
nothing.  Where code is missing, the CLI says so in one line before compiling."""

import os
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from click.testing import CliRunner
from numba import njit

from conftest import REPO, real_pcap
from rtrs_scapy.analysis import warmup
from rtrs_scapy.capture import jit
from rtrs_scapy.capture.ib import ib_offset
from rtrs_scapy.capture.jit import ENTRY_POINTS
from rtrs_scapy.cli import main

PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]


def _cache_base(dispatcher):
    """The name numba gives the function's index file (``module.name-line.pyXY``)."""
    module = dispatcher.py_func.__module__.rsplit(".", 1)[1]
    return "%s.%s-%d.py%d%d" % (module, dispatcher.py_func.__qualname__,
                                 dispatcher.py_func.__code__.co_firstlineno, *sys.version_info[:2])


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The package as a wheel built from a copy of the checkout without any cache,
    installed into a folder of its own."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "__pycache__", "build", "*.egg-info", "pcaps", "tests", "benchmarks"))
    env = dict(os.environ)
    env.pop("NUMBA_CACHE_DIR", None)
    subprocess.run(PIP + ["wheel", "--no-deps", "--no-build-isolation", "-w", str(work), str(source)],
                   check=True, env=env, capture_output=True)
    wheel, = work.glob("rtrs_scapy-*.whl")
    target = work / "site"
    subprocess.run(PIP + ["install", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    return wheel, target


def test_the_wheel_carries_every_entry_point_compiled(installed):
    wheel, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    assert len(ENTRY_POINTS) == 11
    for dispatcher in ENTRY_POINTS:
        base = _cache_base(dispatcher)
        assert any(n.endswith("/__pycache__/%s.nbi" % base) for n in names), base
        assert any(n.endswith(".nbc") and "/%s." % base in n for n in names), base


def test_a_read_only_install_reads_its_first_capture_without_compiling(installed, tmp_path):
    """site-packages mounted read-only (a mount namespace), no writable home: numba has
    no place to write, and loads the entry points the summary calls from the
    wheel's __pycache__; its cache log (on stdout) is the referee."""
    _, target = installed
    capture = real_pcap("basic_noinval")
    script = ('mount --bind "$SITE" "$SITE" && mount -o remount,ro,bind "$SITE" && '
              'exec "$PY" -m rtrs_scapy.cli summary "$CAPTURE"')
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(SITE=str(target), PY=sys.executable, CAPTURE=str(capture), PYTHONPATH=str(target),
               HOME="/nonexistent", NUMBA_DEBUG_CACHE="1")
    done = subprocess.run(["unshare", "--map-root-user", "--mount", "sh", "-c", script],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "compiling" not in done.stderr
    log = [line for line in done.stdout.splitlines() if line.startswith("[cache] ")]
    loaded = [line for line in log if line.startswith("[cache] data loaded from ")]
    assert all(str(target) in line for line in loaded)
    names = {line.rsplit("/", 1)[1].split("-")[0] for line in loaded}
    assert {"records.walk_pcap", "transport.run", "transport.bind"} <= names
    assert [line for line in log if "saved" in line] == []
    checkout = subprocess.run([sys.executable, "-m", "rtrs_scapy.cli", "summary", str(capture)],
                              capture_output=True, text=True, check=True, cwd=REPO)
    summary = "".join(line for line in done.stdout.splitlines(keepends=True)
                      if not line.startswith("[cache] "))
    assert summary == checkout.stdout


def test_the_checkout_is_compiled_by_the_set_up():
    """scripts/setup-venv.sh runs ``rtrs-dissect compile``: nothing is left to compile."""
    assert warmup.missing() == []
    result = CliRunner().invoke(main, ["compile"])
    assert result.exit_code == 0
    assert result.output == "the engine is compiled for this machine (11 entry points)\n"


def test_one_line_before_a_compile(monkeypatch):
    """Code missing for this machine: one line on stderr, then the whole compile, then
    the command's own output."""
    calls = []
    monkeypatch.setattr(warmup, "missing", lambda: ["run"])
    monkeypatch.setattr(warmup, "compile_engine", lambda: calls.append("compile") or 1.0)
    result = CliRunner().invoke(
        main, ["summary", "-q", str(real_pcap("basic_inval"))])
    assert result.exit_code == 0, result.output
    assert calls == ["compile"]
    assert result.stderr.splitlines() == [
        "rtrs-dissect: compiling the engine for this machine, once (about %d s; later runs "
        "load it at once); 'rtrs-dissect compile' does it ahead" % warmup.COMPILE_SECONDS]
    assert result.stdout.startswith(str(real_pcap("basic_inval")))


def test_an_edit_anywhere_in_the_engine_compiles_again(tmp_path, monkeypatch):
    """The machine code holds the helpers and constants of other modules, which numba's
    own key (the entry point's file) does not see: the key's sources hash changes with an
    edit in any of them, not with one outside the engine, and code stored under another
    hash is missing."""
    package = REPO / "rtrs_scapy"
    copy = tmp_path / "rtrs_scapy"
    for name in jit.ENGINE_PACKAGES + ("analysis",):
        shutil.copytree(package / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    assert jit.sources_hash(copy) == jit.engine_sources_hash()
    with open(copy / "analysis" / "summary.py", "a") as out:
        out.write("# not the engine\n")
    assert jit.sources_hash(copy) == jit.engine_sources_hash()
    with open(copy / "layout" / "wire.py", "a") as out:
        out.write("# a constant the locator reads\n")
    assert jit.sources_hash(copy) != jit.engine_sources_hash()
    assert warmup.missing() == []
    monkeypatch.setattr(jit, "engine_sources_hash", lambda: jit.sources_hash(copy))
    assert len(warmup.missing()) == len(ENTRY_POINTS)


def test_a_pipe_uses_the_code_compiled_at_install():
    """Bytes from a pipe, a bytearray or a memoryview reach the engine as a file's mapped
    bytes do, read-only uint8 (``jit.byte_array``): the one type the install compiled, so
    a first ``cat capture | rtrs-dissect -`` compiles nothing."""
    probe = (
        "import sys\n"
        "from numba.core import types\n"
        "from rtrs_scapy.capture.ib import ib_offset\n"
        "from rtrs_scapy.capture.jit import ENTRY_POINTS\n"
        "from rtrs_scapy.cli import main\n"
        "main(['summary', '-q', '-'], standalone_mode=False)\n"
        "ib_offset(bytearray(open(sys.argv[1], 'rb').read()), 40, 100, 1)\n"
        "buffers = [sig[0] for d in ENTRY_POINTS for sig in d.signatures\n"
        "           if isinstance(sig[0], types.Array) and sig[0].dtype == types.uint8]\n"
        "print(len(buffers), sum(b.mutable for b in buffers))\n")
    capture = real_pcap("basic_inval")
    with open(capture, "rb") as stdin:
        run = subprocess.run([sys.executable, "-c", probe, str(capture)], stdin=stdin,
                             capture_output=True, text=True, timeout=600, check=True)
    buffers, writable = map(int, run.stdout.split()[-2:])
    assert buffers > 0 and writable == 0


def test_a_helper_is_compiled_once_for_the_literals_and_buffers_its_callers_pass():
    """Constants, a counter's first value 0 and a scratch copy made read-only reach a
    helper as one signature (numba alone compiles one per literal value and per
    writability): the compile stays the size of the code."""
    @jit.helper
    def weigh(buf, at, scale):
        return np.int64(buf[at]) * scale

    @njit
    def total(buf):
        scratch = np.zeros(4, dtype=np.uint8)
        scratch[0] = 7
        n = 0
        for at in range(buf.shape[0]):
            n += weigh(buf, at, 3) + weigh(buf, 0, 5)
        return n + weigh(jit.read_only(scratch), 0, 2)

    data = jit.byte_array(bytes([1, 2, 3]))
    assert total(data) == sum(3 * b + 5 * 1 for b in (1, 2, 3)) + 14
    assert len(weigh.signatures) == 1


@njit
def _copy_into(dst, src):
    jit.copy_into(dst, src)


@pytest.mark.parametrize("dst_len, src_len", [(4, 4), (4, 1), (0, 0), (1, 1), (0, 1)])
def test_copy_into_copies_as_slice_assignment_does(dst_len, src_len):
    """numpy's slice assignment is the referee: equal lengths copy, one element fills."""
    src = np.arange(10, 10 + src_len, dtype=np.uint8)
    expected, got = np.zeros(dst_len, np.uint8), np.zeros(dst_len, np.uint8)
    expected[:] = src
    _copy_into(got, src)
    assert got.tolist() == expected.tolist()


@pytest.mark.parametrize("dst_len, src_len", [(3, 4), (4, 2), (1, 0)])
def test_copy_into_refuses_lengths_slice_assignment_refuses(dst_len, src_len):
    src = np.arange(10, 10 + src_len, dtype=np.uint8)
    with pytest.raises(ValueError):
        np.zeros(dst_len, np.uint8)[:] = src
    with pytest.raises(ValueError):
        _copy_into(np.zeros(dst_len, np.uint8), src)
