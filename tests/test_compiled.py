"""The engine is compiled when the package is built or installed, not on the user's
first capture, into a native module that runs without numba (rtrs_scapy/capture/jit.py,
capture/native.py, docs/compile.md).

The wheel is built as ``pip install .`` builds it (setup.py compiles into it),
installed, and run from a read-only mount with no home folder: the first summary
imports the shipped module and neither numba nor LLVM.  Where code is missing, the
CLI says so in one line before compiling.  The native module and numba's JIT give
the same results; numba's own behaviours the engine relies on (a helper compiled
once, ``copy_into``) are checked under numba, in a process of their own."""

import json
import os
import shutil
import subprocess
import sys
import threading
import zipfile

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import PROJECT_PCAPS, REPO, real_pcap
from rtrs_scapy.analysis import warmup
from rtrs_scapy.capture import jit, native
from rtrs_scapy.capture.jit import ENTRY_POINTS
from rtrs_scapy.cli import main

PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
#: the entry points Python calls (``rebuild`` is exported where numba compiled it for
#: the compiled code that calls it)
CALLED = {"decode", "walk_pcap", "walk_pcapng", "_fingerprints", "cm_run", "materialize",
          "run", "find", "bind", "play", "write_lines", "decode_requests",
          "decode_responses", "message_kinds", "split", "pair_scan", "record_rows",
          "number_addresses", "add_addresses", "split_kinds", "pair_by_frame"}
#: a script's last line: which of numba and LLVM the process imported
IMPORTED = ("import sys\n"
            "print(sorted(m for m in ('numba', 'llvmlite') if m in sys.modules), file=sys.stderr)\n")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The package as a wheel built from a copy of the checkout without any cache,
    installed into a folder of its own."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "__pycache__", "build", "*.egg-info", "pcaps", "tests", "benchmarks",
        native.MODULE + "*"))
    env = dict(os.environ)
    env.pop("NUMBA_CACHE_DIR", None)
    subprocess.run(PIP + ["wheel", "--no-deps", "--no-build-isolation", "-w", str(work), str(source)],
                   check=True, env=env, capture_output=True)
    wheel, = work.glob("rtrs_scapy-*.whl")
    target = work / "site"
    subprocess.run(PIP + ["install", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    return wheel, target


def test_the_wheel_carries_the_native_engine_built_from_its_sources(installed):
    wheel, target = installed
    names = zipfile.ZipFile(wheel).namelist()
    assert len(ENTRY_POINTS) == 22
    assert any(n.startswith("rtrs_scapy/capture/%s." % native.MODULE) and n.endswith(".so")
               for n in names)
    manifest = json.loads((target / "rtrs_scapy" / "capture" / native.MANIFEST.name).read_text())
    assert CALLED <= set(manifest["functions"]) <= {entry.__name__ for entry in ENTRY_POINTS}
    assert manifest["sources"] == jit.sources_hash(target / "rtrs_scapy")


def test_a_read_only_install_reads_its_first_capture_without_numba(installed, tmp_path):
    """site-packages mounted read-only (a mount namespace), no writable home: the summary
    compiles nothing, imports neither numba nor LLVM, and says what the checkout says."""
    _, target = installed
    capture = real_pcap("basic_noinval")
    script = ('mount --bind "$SITE" "$SITE" && mount -o remount,ro,bind "$SITE" && '
              'exec "$PY" -c "$PROBE" "$CAPTURE"')
    probe = ("from rtrs_scapy.cli import main\n"
             "main(['summary', sys.argv[1]], standalone_mode=False)\n")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(SITE=str(target), PY=sys.executable, CAPTURE=str(capture), PYTHONPATH=str(target),
               HOME="/nonexistent", PROBE="import sys\n" + probe + IMPORTED)
    done = subprocess.run(["unshare", "--map-root-user", "--mount", "sh", "-c", script],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr == "[]\n"
    checkout = subprocess.run([sys.executable, "-m", "rtrs_scapy.cli", "summary", str(capture)],
                              capture_output=True, text=True, check=True, cwd=REPO)
    assert done.stdout == checkout.stdout


def test_the_checkout_is_compiled_by_the_set_up():
    """scripts/setup-venv.sh runs ``rtrs-dissect compile``: nothing is left to compile,
    and the native module holds every entry point Python calls (one the warm-up does not
    call would be compiled by numba at a user's first call of it)."""
    assert warmup.missing() == []
    assert CALLED <= set(json.loads(native.MANIFEST.read_text())["functions"])
    result = CliRunner().invoke(main, ["compile"])
    assert result.exit_code == 0
    assert result.output == "the engine is compiled for this machine (22 entry points)\n"


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


def test_without_a_compiler_the_engine_runs_under_numba(tmp_path):
    """The native module cannot be built (no C compiler, say): the compile says so in one
    line, the commands run under numba's cache, and none asks for a compile again."""
    script = ("import sys\n"
              "from pathlib import Path\n"
              "from rtrs_scapy.analysis import warmup\n"
              "from rtrs_scapy.capture import jit, native\n"
              "native.MANIFEST = Path(sys.argv[1]) / native.MANIFEST.name\n"
              "def no_compiler(*args):\n"
              "    raise OSError('gcc: not found')\n"
              "native.build = no_compiler\n"
              "warmup.compile_engine()\n"
              "print(jit.missing(), native.load(jit.engine_sources_hash()))\n"
              "from rtrs_scapy.cli import main\n"
              "main(['summary', sys.argv[2]], standalone_mode=False)\n")
    capture = real_pcap("errors")
    done = subprocess.run([sys.executable, "-c", script + IMPORTED, str(tmp_path), str(capture)],
                          capture_output=True, text=True, check=True, cwd=REPO)
    assert done.stderr.splitlines() == [
        "rtrs-dissect: the native engine was not built (gcc: not found): the engine runs under "
        "numba, 0.3 s more at each start and 65 MB more memory (docs/compile.md)",
        "['llvmlite', 'numba']"]
    first, summary = done.stdout.split("\n", 1)
    assert first == "[] {}"
    assert json.loads((tmp_path / native.MANIFEST.name).read_text())["unbuilt"] == "gcc: not found"
    assert summary == CliRunner().invoke(main, ["summary", str(capture)]).output


def test_a_pipe_uses_the_code_compiled_at_install():
    """Bytes from a pipe, a bytearray or a memoryview reach the engine as a file's mapped
    bytes do, read-only uint8 (``jit.byte_array``): the type the native module was built
    for, so ``cat capture | rtrs-dissect -`` runs it, without numba, and says what the
    file says."""
    probe = ("import sys\n"
             "from rtrs_scapy.capture.ib import ib_offset\n"
             "from rtrs_scapy.cli import main\n"
             "main(['summary', '-'], standalone_mode=False)\n"
             "print(ib_offset(bytearray(open(sys.argv[1], 'rb').read()), 40, 100, 1))\n")
    capture = real_pcap("basic_inval")
    with open(capture, "rb") as stdin:
        run = subprocess.run([sys.executable, "-c", probe + IMPORTED, str(capture)], stdin=stdin,
                             capture_output=True, text=True, timeout=600, check=True)
    assert run.stderr == "[]\n"
    from_file = CliRunner().invoke(main, ["summary", str(capture)]).output
    assert run.stdout.split("\n", 1)[1].rsplit("\n", 2)[0] == from_file.split("\n", 1)[1].rstrip("\n")


@pytest.mark.parametrize("command", [
    ["summary", str(real_pcap("failover"))],
    ["summary", "--format", "json", str(PROJECT_PCAPS / "multipath_failover.pcap")],
    ["messages", "--format", "json", "--other", str(real_pcap("errors"))],
])
def test_the_native_module_and_numba_agree(command):
    """The same command under the native module and under numba's JIT
    (``RTRS_SCAPY_ENGINE=numba``): the same bytes."""
    outputs = []
    for engine in ("native", "numba"):
        env = dict(os.environ, RTRS_SCAPY_ENGINE=engine)
        outputs.append(subprocess.run([sys.executable, "-m", "rtrs_scapy.cli", *command],
                                      capture_output=True, text=True, env=env, check=True,
                                      cwd=REPO).stdout)
    assert outputs[0] == outputs[1] and len(outputs[0]) > 1000


def test_the_native_module_refuses_what_it_was_not_built_for():
    """numba's ahead-of-time wrappers convert arguments unchecked; the checks in front
    of them refuse another dtype, a strided array, a read-only array where the code
    writes, a float for an integer and a wrong count, and pass what the engine gives."""
    find = native.load(jit.engine_sources_hash())["find"]
    table, state = np.full(8, -1, dtype=np.int64), np.zeros((4, 64), dtype=np.int64)
    assert find(table, state, 1, 2, np.int64(3)) == -1
    frozen = state.copy()
    frozen.flags.writeable = False
    for wrong in [(table.astype(np.float64), state, 1, 2, 3), (table, state[:, ::2], 1, 2, 3),
                  (table, state, 1.0, 2, 3), (table, state, 1, 2), (table[None], state, 1, 2, 3)]:
        with pytest.raises(TypeError, match=r"^find takes \("):
            find(*wrong)
    write_lines = native.load(jit.engine_sources_hash())["write_lines"]
    with pytest.raises(TypeError):
        write_lines(*[frozen] * 11)


def test_the_native_code_runs_without_the_gil():
    """The read-ahead thread walks and decodes while the main thread analyses: while
    another thread is inside a native call (a lookup probing 16 M slots), this one
    runs.  Holding the GIL, it could not run at all while the other is inside."""
    find = native.load(jit.engine_sources_hash())["find"]
    table = np.zeros(1 << 24, dtype=np.int64)           # every slot holds stream 0
    state = np.zeros((1, 64), dtype=np.int64)
    state[0, :] = -7                                     # which matches no key
    table[-1] = -1                                       # the probe ends at the last slot
    inside, done, steps = threading.Event(), threading.Event(), [0]

    def other():
        for _ in range(5):
            inside.set()
            find(table, state, 0, 0, 0)
            inside.clear()
        done.set()
    thread = threading.Thread(target=other)
    thread.start()
    while not done.is_set():
        if inside.is_set():
            steps[0] += 1
    thread.join()
    assert steps[0] > 10_000


NUMBA_SCRIPT = """
import json, sys
import numpy as np
from numba import njit
from rtrs_scapy.capture import jit
jit.use_numba()

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

@njit
def copy_into(dst, src):
    jit.copy_into(dst, src)

def copied(dst_len, src_len):
    got = np.zeros(dst_len, np.uint8)
    try:
        copy_into(got, np.arange(10, 10 + src_len, dtype=np.uint8))
    except ValueError:
        return "ValueError"
    return got.tolist()

json.dump({"total": int(total(jit.byte_array(bytes([1, 2, 3])))),
           "signatures": len(weigh.signatures),
           "copies": [copied(*lengths) for lengths in json.loads(sys.argv[1])]}, sys.stdout)
"""
#: (dst, src) lengths: numpy's slice assignment copies the first, refuses the last three
COPIES = [(4, 4), (4, 1), (0, 0), (1, 1), (0, 1), (3, 4), (4, 2), (1, 0)]


@pytest.fixture(scope="module")
def under_numba():
    """What NUMBA_SCRIPT finds, in a process of its own (use_numba is for good)."""
    done = subprocess.run([sys.executable, "-c", NUMBA_SCRIPT, json.dumps(COPIES)],
                          capture_output=True, text=True, check=True, cwd=REPO)
    return json.loads(done.stdout)


def test_a_helper_is_compiled_once_for_the_literals_and_buffers_its_callers_pass(under_numba):
    """Constants, a counter's first value 0 and a scratch copy made read-only reach a
    helper as one signature (numba alone compiles one per literal value and per
    writability): the compile stays the size of the code."""
    assert under_numba["total"] == sum(3 * b + 5 * 1 for b in (1, 2, 3)) + 14
    assert under_numba["signatures"] == 1


def test_copy_into_copies_as_slice_assignment_does(under_numba):
    """numpy's slice assignment is the referee: equal lengths copy, one element fills,
    other lengths are refused."""
    expected = []
    for dst_len, src_len in COPIES:
        dst = np.zeros(dst_len, np.uint8)
        try:
            dst[:] = np.arange(10, 10 + src_len, dtype=np.uint8)
        except ValueError:
            expected.append("ValueError")
        else:
            expected.append(dst.tolist())
    assert under_numba["copies"] == expected
