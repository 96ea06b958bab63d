"""The analyzer's share of the state limits (rtrs_scapy/spec/limits.py) and what
reaching them cost, for the ``capture.limits`` block of the summary; anomalies
as counts per kind plus the first examples of each.

A real capture never reaches a limit (tests/test_hostile.py holds that on the
real captures and the corpus); a hostile one costs evictions, counted here, and
never memory that grows with what the file claims.
"""

from collections import Counter

from ..engine import transport as T
from ..spec.limits import kept_by


class Bounds:
    def __init__(self, overrides=None):
        self.size = {name: entries for name, entries, _what in kept_by("analyzer")}
        self.size.update(overrides or {})
        self.evicted = Counter()    # table -> entries evicted (least recently used first)
        self.refused = Counter()    # table -> entries not made because the table was full

    def evict(self, table, count=1):
        """``count`` entries of ``table`` were evicted to make room."""
        self.evicted[table] += count

    def refuse(self, table):
        """An entry of ``table`` was not made: the table was full."""
        self.refused[table] += 1

    def keep(self, table, items, item):
        """Append ``item`` to ``items`` while the ``table`` bound allows; else count it."""
        if len(items) < self.size[table]:
            items.append(item)
        else:
            self.refuse(table)

    def keep_new(self, table, kept, items):
        """Add to the set ``kept`` the ``items`` not in it while the ``table`` bound
        allows; count the others."""
        for item in items:
            if item not in kept:
                if len(kept) < self.size[table]:
                    kept.add(item)
                else:
                    self.refuse(table)

    def summary(self, transport_counters):
        evicted = dict(self.evicted)
        evicted["streams"] = int(transport_counters[T.G_EVICTIONS])
        evicted["messages"] = int(transport_counters[T.G_EVICTED_MESSAGES])  # in reassembly
        evicted = {name: count for name, count in evicted.items() if count}
        return {"sizes": dict(self.size), "evicted": evicted, "refused": dict(self.refused),
                "reached": bool(evicted or self.refused)}


class Anomalies:
    """Every anomaly counted by kind; the first ``per_kind`` of each kept as examples,
    their text made only then."""

    def __init__(self, per_kind):
        self.per_kind = per_kind
        self.counts = Counter()
        self.examples = []

    def add(self, frame, kind, detail, args=()):
        count = self.counts[kind] = self.counts[kind] + 1
        if count <= self.per_kind:
            self.examples.append({"frame": frame, "kind": kind,
                                  "detail": detail % args if args else detail})
