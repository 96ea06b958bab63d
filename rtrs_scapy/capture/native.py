"""The engine built ahead of time: one extension module holding every entry point's
machine code, imported by a run without numba (capture/jit.py says when).

numba's ahead-of-time compiler (``numba.pycc``) builds it from the entry points'
sources, for the argument types numba's JIT gave them on the warm-up capture, for
any x86-64 rather than this CPU alone (a wheel moves between machines).  Its
functions release the GIL as the JIT's do (``nogil``), so that the read-ahead
thread walks and decodes while the main thread analyses.  They convert their
arguments without checking them (a float array would be read as integers, a
strided one as contiguous), so each is called through a check of the types it
was built for.
"""

import importlib
import inspect
import json
import os
import warnings
from pathlib import Path

import numpy as np

#: the extension module's name, in this package
MODULE = "_engine"
#: what it was built from and for: the sources hash and each function's argument types
MANIFEST = Path(__file__).with_name(MODULE + ".json")


def load(sources):
    """{name: checked function} of the module built from ``sources`` (a hash, see
    jit.engine_sources_hash), or None when there is none."""
    try:
        manifest = json.loads(MANIFEST.read_text())
    except (OSError, ValueError):
        return None
    if manifest.get("sources") != sources:
        return None
    if not manifest["functions"]:
        return {}
    try:
        module = importlib.import_module("%s.%s" % (__package__, MODULE))
    except (ImportError, OSError):      # another Python or numpy, a damaged file
        return None
    return {name: _checked(getattr(module, name), name, arguments)
            for name, arguments in manifest["functions"].items()}


def _checked(function, name, arguments):
    """``function`` refusing arguments of other types than it was built for."""
    checks = [_check(argument) for argument in arguments]

    def call(*args):
        if len(args) != len(checks) or not all(check(arg) for check, arg in zip(checks, args)):
            raise TypeError("%s takes (%s)" % (name, ", ".join(map(str, arguments))))
        return function(*args)
    call.__name__ = name
    return call


def _check(argument):
    """A test of a value for one argument type of the manifest."""
    if argument == "int":
        return lambda value: isinstance(value, (int, np.integer))
    if argument == "bool":
        return lambda value: isinstance(value, (bool, np.bool_))
    dtype, ndim, readonly = np.dtype(argument[0]), argument[1], argument[2]
    return lambda value: (isinstance(value, np.ndarray) and value.dtype == dtype
                          and value.ndim == ndim and value.flags.c_contiguous
                          and (readonly or value.flags.writeable))


def _argument(numba_type):
    """An argument type of a numba signature as the manifest writes it."""
    from numba.core import types
    if isinstance(numba_type, types.Array) and numba_type.layout == "C":
        return [str(numba_type.dtype), numba_type.ndim, not numba_type.mutable]
    if isinstance(numba_type, types.Boolean):
        return "bool"
    if isinstance(numba_type, types.Integer) and numba_type.bitwidth == 64:
        return "int"
    raise TypeError("the native module takes no %s" % numba_type)


def build(entries, sources):
    """Build the module, and its manifest, into this package from the entry points
    numba has compiled (one signature each); returns the module's path."""
    import tempfile
    from numba.core.compiler import Flags
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from numba.pycc import CC, compiler as aot
    called = [e for e in entries if e.dispatcher.signatures]
    for entry in called:
        if len(entry.dispatcher.signatures) != 1:
            raise TypeError("%s was compiled for several argument types: %s"
                            % (entry.__name__, entry.dispatcher.signatures))
    with tempfile.TemporaryDirectory() as work:
        cc = CC(MODULE, source_module=__name__)
        cc.output_dir = work
        cc.verbose = False
        for entry in called:
            cc.export(entry.__name__, entry.dispatcher.signatures[0])(_uncounted(entry))

        class ReleasingTheGil(Flags):
            """pycc's compile flags, with the GIL released in the functions' wrappers."""

            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                self.release_gil = True

        plain, aot.Flags = aot.Flags, ReleasingTheGil
        try:
            cc.compile()
        finally:
            aot.Flags = plain
        built = MANIFEST.with_name(cc.output_file)
        _replace(built, (Path(work) / cc.output_file).read_bytes())
    _write_manifest(sources, {e.__name__: [_argument(t) for t in e.dispatcher.signatures[0]]
                              for e in called})
    return built


def _uncounted(entry):
    """What the module exports for ``entry``: a call of its function compiled as a
    helper.  pycc compiles the functions it exports with reference counting, and an
    entry point's per-packet views (a stream's state row, a slice of the packet) would
    each be counted (an atomic increment and decrement); a helper counts only when it
    ``allocates`` (jit.py).  The transport: 118–139 → 99–121 ns a packet
    (docs/benchmarks.md)."""
    from .jit import as_helper
    names = ", ".join(inspect.signature(entry.py_func).parameters)
    namespace = {"body": as_helper(entry.py_func, entry.allocates)}
    exec("def %s(%s):\n    return body(%s)\n" % (entry.__name__, names, names), namespace)
    return namespace[entry.__name__]


def without(sources, why):
    """No module could be built (no C compiler, say): a manifest for ``sources`` with no
    functions, so that the entry points run under numba's cache and nothing asks for a
    compile again."""
    _write_manifest(sources, {}, str(why))


def _write_manifest(sources, functions, unbuilt=None):
    manifest = {"sources": sources, "functions": functions}
    if unbuilt is not None:
        manifest["unbuilt"] = unbuilt
    _replace(MANIFEST, (json.dumps(manifest, indent=1) + "\n").encode())


def _replace(path, data):
    """``path`` holds ``data``, as a new file (a running process keeps the old one)."""
    fresh = path.with_name(path.name + ".new")
    fresh.write_bytes(data)
    os.replace(fresh, path)
