"""The engine's compiled loops: written for numba, built ahead of the first capture
into a native module that runs without numba.

The engine's loops are numba code: :func:`helper` marks a function only compiled
code calls, :func:`compiled` an entry point Python calls.  ``rtrs-dissect compile``
(run by the install, ``setup.py`` and ``scripts/dissect.sh``) compiles them with
numba on a sample capture, which gives each entry point its argument types, then
builds them ahead of time into one extension module (capture/native.py).  A run
imports that module and never numba: numba and LLVM would cost 0.3 s at start and
65 MB of resident memory, about a third of a 10 M-packet summary's peak
(docs/compile.md).

The native module is used only when it was built from the sources in this
package: its manifest carries a hash of every source the machine code is made of
(:data:`ENGINE_PACKAGES`; a helper's constant read from another module counts).
After an edit, or where the module could not be built, the entry points run under
numba's JIT with its cache, keyed on the same hash; ``RTRS_SCAPY_ENGINE=numba``
asks for numba even where the module is built (its allocation counters, its
annotations, a profile of the Python that numba compiles).

Under numba the decorators below turn into numba's objects (:func:`use_numba`):
a helper is compiled once for the plain types of its arguments, not once per
literal a caller passes (numba types a constant, a header field's index or a loop
counter's first value ``0``, as a literal of its value); :func:`read_only` gives a
scratch copy the type of the buffers the engine reads, so that the byte readers
are compiled once; :func:`copy_into` copies without the code numba's slice
assignment brings to format its shape error.

numba counts the references to every array in compiled code: each array argument
of a call and each view (``state[slot]``, ``buf[a:b]``) is an atomic increment and
decrement of a shared counter, which on this engine's per-packet paths cost more than
the work they guard (a helper taking an array and a few bytes of it: 57 ns a call
counted, 3 ns not; docs/benchmarks.md, Stages).  Nothing here needs them: the arrays
belong to Python, which holds them for the whole call, and no compiled function keeps
or returns a view of them.  So helpers are compiled without reference counting
(numba's ``_nrt`` option), but for the few that make an array (``np.zeros``,
``.copy()``, ``np.argsort``: numba's allocator is part of the counting), marked
``allocates=True``; the compiler refuses an allocation in the others.  Entry points
likewise: under numba's JIT they are compiled so, and ``numba.pycc``, which compiles
what it exports with the runtime, exports a call of each compiled as a helper
(native.py, with what that saves).
"""

import functools
import hashlib
import os
import sys
import threading
from pathlib import Path

import numpy as np

#: every compiled entry point (called from Python), in the order they were defined
ENTRY_POINTS = []
#: the packages whose sources end up in the engine's machine code
ENGINE_PACKAGES = ("spec", "layout", "capture", "engine")
#: the environment variable that asks for numba's JIT (``numba``) over the native module
ENGINE_VARIABLE = "RTRS_SCAPY_ENGINE"

_deferred = {}                  # id(placeholder) -> (placeholder, what numba makes of it)
_numba = threading.Lock()
_numba_made = {}                # id(placeholder) -> numba's object, once use_numba ran


@functools.lru_cache(maxsize=None)
def engine_sources_hash():
    """A hash of the engine's sources in this package: the native module's and numba's
    cache key."""
    return sources_hash(Path(__file__).resolve().parent.parent)


def sources_hash(root):
    """A hash of the sources of :data:`ENGINE_PACKAGES` under the package folder *root*."""
    digest = hashlib.sha256()
    for package in ENGINE_PACKAGES:
        for source in sorted((root / package).glob("*.py")):
            digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()


def int_array(values):
    """``values`` as the entry points take a column of integers: int64, contiguous and
    writable (an array of another type, a view or a read-only one is copied once)."""
    values = np.ascontiguousarray(values, dtype=np.int64)
    return values if values.flags.writeable else values.copy()


def byte_array(data):
    """``data`` (bytes, bytearray, memoryview, mmap) as the engine reads bytes: uint8 and
    read-only, the one type its entry points are built for (a writable buffer, a pipe's
    chunk say, would have numba compile them again)."""
    array = np.frombuffer(data, dtype=np.uint8)
    if array.flags.writeable:
        array = array.view()
        array.flags.writeable = False
    return array


def _defer(placeholder, make):
    """``placeholder`` stands for ``make()`` (a numba object) once numba is in use."""
    if _numba_made:
        return make()
    _deferred[id(placeholder)] = (placeholder, make)
    return placeholder


def helper(function=None, allocates=False):
    """A function only compiled code calls (see the module's docstring)."""
    if function is None:
        return lambda function: helper(function, allocates)
    placeholder = functools.wraps(function)(lambda *args: function(*args))
    return _defer(placeholder, lambda: as_helper(function, allocates))


def read_only(array):
    """``array`` (compiled code only) typed as read-only, like the buffers
    :func:`byte_array` gives: the same data, and helpers that read it are not compiled
    again for it."""
    return array


def prefetch(array, index):
    """Ask the CPU to bring the cache line of ``array[index]`` in (compiled code only;
    a hint: it never faults, and an index past the end is harmless).  Unlike a load, it
    does not hold the instructions after it until the line arrives."""


@helper
def copy_into(dst, src):
    """``dst[:] = src`` for 1-D arrays (``src`` of one element fills ``dst``), a
    ValueError when their lengths do not fit."""
    n, m = dst.shape[0], src.shape[0]
    if m != n and m != 1:
        raise ValueError("copy_into: the lengths differ")
    step = 1 if m == n else 0
    for k in range(n):
        dst[k] = src[k * step]


class EntryPoint:
    """A compiled function Python calls: the native module's when it is built for
    these sources, else numba's, chosen on the first call."""

    def __init__(self, function, allocates):
        self.py_func = function
        self.allocates = allocates
        self.dispatcher = None          # numba's, once use_numba ran
        self._call = None
        functools.update_wrapper(self, function)

    def __call__(self, *args):
        call = self._call
        if call is None:
            call = self._call = self._choose()
        return call(*args)

    def _choose(self):
        functions = None if _numba_made else native_functions()
        if functions is not None and self.__name__ in functions:
            return functions[self.__name__]
        use_numba()
        return self.dispatcher


def compiled(function=None, allocates=False):
    """An entry point of the engine (``nogil``: it runs beside the analysis in the
    read-ahead thread), without reference counting unless it ``allocates``."""
    if function is None:
        return lambda function: compiled(function, allocates)
    entry = EntryPoint(function, allocates)
    ENTRY_POINTS.append(entry)
    if _numba_made:
        _numba_entry(entry)
    return entry


@functools.lru_cache(maxsize=None)
def native_functions():
    """{name: function} of the native module built for these sources, or None (not
    built, built from other sources, or numba asked for)."""
    if os.environ.get(ENGINE_VARIABLE) == "numba":
        return None
    from . import native
    return native.load(engine_sources_hash())


def missing():
    """Names of the entry points not compiled for these sources (none once the native
    module is built, or once it could not be and numba compiled them into its cache)."""
    from . import native
    built = native.load(engine_sources_hash()) is not None
    return [] if built else [entry.__name__ for entry in ENTRY_POINTS]


def use_numba():
    """Run the engine under numba from now on, in this process: every placeholder of
    the engine's modules (helpers, :func:`read_only`, entry points) is replaced by
    numba's object where a module holds it, so that numba compiles the code that
    calls them; the entry points call numba's dispatchers."""
    with _numba:
        if _numba_made:
            return
        _numba_made.update((key, make()) for key, (_, make) in _deferred.items())
        _numba_made[id(read_only)] = _numba_read_only()
        _numba_made[id(prefetch)] = _numba_prefetch()
        for entry in ENTRY_POINTS:
            _numba_made[id(entry)] = _numba_entry(entry)
        for module in list(sys.modules.values()):
            names = getattr(module, "__dict__", None)
            if not isinstance(names, dict):
                continue
            for name, value in list(names.items()):
                made = _numba_made.get(id(value))
                if made is not None:
                    names[name] = made


def _numba_entry(entry):
    from numba import njit
    entry.dispatcher = njit(nogil=True, _nrt=entry.allocates)(entry.py_func)
    entry.dispatcher._cache = _numba_cache(entry.py_func)
    entry._call = entry.dispatcher
    return entry.dispatcher


def _numba_cache(function):
    """numba's function cache, with the engine's sources hash in its key."""
    from numba.core import caching

    class SourcesKeyedCache(caching.FunctionCache):
        def _index_key(self, sig, codegen):
            return super()._index_key(sig, codegen) + (engine_sources_hash(),)
    return SourcesKeyedCache(function)


def as_helper(function, allocates):
    """``function`` compiled by numba as a helper (numba is imported)."""
    from numba.core import types
    from numba.core.registry import CPUDispatcher

    class Helper(CPUDispatcher):
        """Compiled for its callers' plain (non-literal) argument types."""

        def get_call_template(self, args, kws):
            return super().get_call_template(
                tuple(types.unliteral(a) for a in args),
                {k: types.unliteral(v) for k, v in kws.items()})
    return Helper(py_func=function, locals={},
                  targetoptions={"nopython": True, "boundscheck": None, "_nrt": allocates,
                                 "no_cpython_wrapper": True, "no_cfunc_wrapper": True})


def _numba_read_only():
    from numba.core.imputils import impl_ret_borrowed
    from numba.extending import intrinsic

    @intrinsic
    def read_only(typingctx, array):
        result = array.copy(readonly=True)

        def codegen(context, builder, signature, args):
            return impl_ret_borrowed(context, builder, result, args[0])
        return result(array), codegen
    return read_only


def _numba_prefetch():
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    @intrinsic
    def prefetch(typingctx, array, index):
        def codegen(context, builder, signature, args):
            data = context.make_array(signature.args[0])(context, builder, args[0]).data
            pointer = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(8).as_pointer())
            i32 = ir.IntType(32)
            declared = builder.module.declare_intrinsic(
                "llvm.prefetch", [pointer.type],
                ir.FunctionType(ir.VoidType(), [pointer.type, i32, i32, i32]))
            builder.call(declared, [pointer, i32(0), i32(3), i32(1)])  # read, keep, data
            return context.get_dummy_value()
        return types.none(array, types.int64), codegen
    return prefetch
