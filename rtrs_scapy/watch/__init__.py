"""``rtrs-dissect watch``: RTRS sessions second by second, from a live stream or a
capture file replayed.

The summary's engine and analyzer run chunk by chunk (``watcher.py``); the IO
rows the analyzer hands out as each request's fate is known are summed per
interval (``stats.py``), so the intervals add up to the summary of the same
input.  ``pacing.py`` cuts the input into intervals (the capture's clock for
files, the wall clock for live input), ``inputs.py`` opens files, standard
input and interfaces, and the intervals go to a terminal view
(``screen.py``), JSON lines (``Interval.json()``) or a Prometheus exporter
(``exporter.py``).
"""
