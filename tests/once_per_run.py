"""Work that tests on both pytest-xdist workers need, done once per run instead of once
per worker: ``@once_per_run`` keeps a function's result for the same arguments in a
pickle in the run's temporary folder (the workers' common parent of their own ones),
and a lock on that file makes the second worker wait for the first instead of doing
the same again.  Without xdist, or before the session's folder is known, it is an
ordinary per-process cache.  The arguments are keyed by their repr (paths, names,
numbers); the results must pickle; like ``functools.lru_cache``, a caller must not
change what it gets."""

import fcntl
import functools
import hashlib
import pickle

#: the folder the results go to (conftest: the run's temporary folder), None: per process
folder = None


def once_per_run(function):
    @functools.lru_cache(maxsize=None)
    def cached(*args):
        if folder is None:
            return function(*args)
        key = repr((function.__module__, function.__qualname__, args))
        path = folder / ("%s-%s.pickle" % (function.__name__,
                                           hashlib.sha256(key.encode()).hexdigest()[:24]))
        with open(path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if path.exists():
                return pickle.loads(path.read_bytes())
            value = function(*args)
            partial = path.with_suffix(".partial")
            partial.write_bytes(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))
            partial.replace(path)
            return value
    functools.update_wrapper(cached, function)
    return cached
