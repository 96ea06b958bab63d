"""The engine's compiled loops: compiled once, when the package is installed.

numba compiles a function on its first call and, with caching, keeps the
machine code beside the source (``__pycache__``) under a hash of the source.
Compiling the engine's entry points takes tens of seconds, so it is done when
the package is built (``setup.py`` runs ``rtrs-dissect compile``'s work into
the wheel's ``__pycache__``) or, in a checkout, by ``scripts/dissect.sh``.

numba's own cache places need a writable folder: an install in a read-only
site-packages would find its shipped code and still compile on every run.
:func:`compiled` therefore gives each entry point a cache that, after numba's
usual places (``NUMBA_CACHE_DIR``, a writable ``__pycache__``, the user's cache
folder), also *reads* the package's own ``__pycache__`` when it cannot write
there.  The code is only used for the machine and numba version it was built
for (numba checks both); anything else compiles as before.

numba keys its cache on the entry point's own file, but the machine code also
holds the helpers it calls and the constants it reads from other modules: the
key here adds a hash of every source the engine is compiled from
(:data:`ENGINE_PACKAGES`), so an edit anywhere in them compiles again.

The helpers the entry points call are compiled with them, once per distinct
argument types.  numba types a constant (a header field's index, a loop counter's
first value ``0``) as a literal of its value, and would compile a helper again, with
everything it calls, for each literal a caller passes: :func:`helper` compiles it
for the plain types only, and :func:`read_only` gives a scratch copy the type of
the buffers the engine reads, so that the byte readers are compiled once.  numba's
slice assignment (``a[i:j] = b[k:l]``) brings along code that formats its shape
error's message, compiled into every entry point that assigns one:
:func:`copy_into` does the same copy without it.

numba counts the references to every array in its compiled code: each array argument
of a call and each view (``state[slot]``, ``buf[a:b]``) is an atomic increment and
decrement of a shared counter, which on this engine's per-packet paths cost more than
the work they guard (a helper taking an array and a few bytes of it: 57 ns a call
counted, 3 ns not; perf of a summary showed the reader's thread spending more time in
them than in the record walk and the IB decode: docs/benchmarks.md, Stages).  Nothing
here needs them: the arrays belong to Python, which holds them for the whole call,
and no compiled function keeps or returns a view of them.  So :func:`helper` and
:func:`compiled` compile without reference counting (numba's ``_nrt`` option), but for
the few that make an array (``np.zeros``, ``.copy()``, ``np.argsort``: numba's
allocator is part of the counting), marked ``allocates=True``; the compiler refuses an
allocation in the others.
"""

import hashlib
import os
from functools import lru_cache
from pathlib import Path

import numpy as np
from numba import njit, types
from numba.core import caching
from numba.core.imputils import impl_ret_borrowed
from numba.core.registry import CPUDispatcher
from numba.core.runtime import rtsys
from numba.extending import intrinsic

#: every compiled entry point (called from Python), for :func:`missing`
ENTRY_POINTS = []
#: the packages whose sources end up in the engine's machine code
ENGINE_PACKAGES = ("spec", "layout", "capture", "engine")


@lru_cache(maxsize=None)
def engine_sources_hash():
    """A hash of the engine's sources in this package, part of every cache key."""
    return sources_hash(Path(__file__).resolve().parent.parent)


def sources_hash(root):
    """A hash of the sources of :data:`ENGINE_PACKAGES` under the package folder *root*."""
    digest = hashlib.sha256()
    for package in ENGINE_PACKAGES:
        for source in sorted((root / package).glob("*.py")):
            digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()


class _ShippedLocator(caching.InTreeCacheLocator):
    """The package's ``__pycache__`` even when it is read-only: for loading only."""

    @classmethod
    def from_function(cls, py_func, py_file):
        return cls(py_func, py_file) if os.path.isdir(os.path.dirname(py_file)) else None

    def ensure_cache_path(self):
        raise OSError("read-only: %s" % self.get_cache_path())


class _Impl(caching.CompileResultCacheImpl):
    _locator_classes = [caching.UserProvidedCacheLocator, caching.InTreeCacheLocator,
                        caching.UserWideCacheLocator, _ShippedLocator]


class _ShippedCache(caching.FunctionCache):
    """numba's function cache, falling back to the code shipped in the package."""

    _impl_class = _Impl

    def __init__(self, py_func, allocates):
        super().__init__(py_func)
        self._allocates = allocates
        self._shipped = caching.IndexDataCacheFile(
            cache_path=_ShippedLocator(py_func, self._impl.locator._py_file).get_cache_path(),
            filename_base=self._impl.filename_base,
            source_stamp=self._impl.locator.get_source_stamp())

    def load_overload(self, sig, target_context):
        """numba's load, without refreshing the whole compiler first (every typing and
        lowering registry: ~0.25 s, most of a small capture's run).  Machine code that is
        already built needs none of it, only the runtime's symbols when it allocates; a
        miss compiles, and numba's compiler refreshes for itself."""
        rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)

    def _index_key(self, sig, codegen):
        return super()._index_key(sig, codegen) + (engine_sources_hash(),)

    def _load_overload(self, sig, target_context):
        found = super()._load_overload(sig, target_context)
        if found is None and self._enabled:
            data = self._shipped.load(self._index_key(sig, target_context.codegen()))
            found = None if data is None else self._impl.rebuild(target_context, data)
        return found

    def _save_overload(self, sig, data):
        if not isinstance(self._impl.locator, _ShippedLocator):
            super()._save_overload(sig, data)

    def has_code_for(self, codegen):
        """Is there machine code for this machine and these sources (any signature),
        here or shipped?"""
        magic, sources = codegen.magic_tuple(), engine_sources_hash()
        return any(key[1] == magic and key[-1] == sources
                   for index in (self._cache_file, self._shipped)
                   for key in index._load_index())


def byte_array(data):
    """``data`` (bytes, bytearray, memoryview, mmap) as the engine reads bytes: uint8 and
    read-only, the one type its entry points are compiled for when installed (a writable
    buffer, a pipe's chunk say, would have them compiled again on the user's first run)."""
    array = np.frombuffer(data, dtype=np.uint8)
    if array.flags.writeable:
        array = array.view()
        array.flags.writeable = False
    return array


class _Helper(CPUDispatcher):
    """A dispatcher whose jitted callers get the overload for their arguments' plain
    (non-literal) types."""

    def get_call_template(self, args, kws):
        return super().get_call_template(tuple(types.unliteral(a) for a in args),
                                         {k: types.unliteral(v) for k, v in kws.items()})


def helper(function=None, allocates=False):
    """``@njit`` for a function only jitted code calls: compiled once per plain argument
    types, not once per literal value passed to it, without the wrappers that would let
    Python call it, and without reference counting unless it ``allocates`` (see the
    module's docstring)."""
    if function is None:
        return lambda function: helper(function, allocates)
    return _Helper(py_func=function, locals={},
                   targetoptions={"nopython": True, "boundscheck": None, "_nrt": allocates,
                                  "no_cpython_wrapper": True, "no_cfunc_wrapper": True})


@intrinsic
def read_only(typingctx, array):
    """``array`` (jitted code only) typed as read-only, like the buffers :func:`byte_array`
    gives: the same data, and helpers that read it are not compiled again for it."""
    result = array.copy(readonly=True)

    def codegen(context, builder, signature, args):
        return impl_ret_borrowed(context, builder, result, args[0])
    return result(array), codegen


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


def compiled(function=None, allocates=False):
    """``@njit(nogil=True)`` with the cache described above, without reference counting
    unless it ``allocates``."""
    if function is None:
        return lambda function: compiled(function, allocates)
    dispatcher = njit(nogil=True, _nrt=allocates)(function)
    dispatcher._cache = _ShippedCache(function, allocates)
    ENTRY_POINTS.append(dispatcher)
    return dispatcher


def missing():
    """Names of the entry points that the next call would compile first."""
    from numba.core.registry import cpu_target
    codegen = cpu_target.target_context.codegen()
    return [d.py_func.__qualname__ for d in ENTRY_POINTS if not d._cache.has_code_for(codegen)]
