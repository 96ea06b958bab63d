"""Growable numpy columns: a table that rows are appended to in batches, for the
message records (records.py) — a few bytes per value instead of a Python object."""

import numpy as np

from .growing import capacity_for


class Columns:
    """``spec``: name -> (dtype, default).  Rows are added by ``extend`` (their
    values are the defaults until set); ``data[name][:n]`` are the rows."""

    def __init__(self, spec, capacity=1024):
        self.spec = spec
        self.n = 0
        self.data = {name: np.full(capacity, default, dtype=dtype)
                     for name, (dtype, default) in spec.items()}

    def __len__(self):
        return self.n

    def extend(self, count):
        """Room for ``count`` more rows; returns the index of the first."""
        start = self.n
        need = start + count
        capacity = len(next(iter(self.data.values())))
        if need > capacity:
            capacity = capacity_for(need)
            for name, (dtype, default) in self.spec.items():
                grown = np.full(capacity, default, dtype=dtype)
                grown[:start] = self.data[name][:start]
                self.data[name] = grown
        self.n = need
        return start

    def __getitem__(self, name):
        return self.data[name][:self.n]
