"""The full-screen view of ``watch`` (Textual): one row per path grouped by
session, the event log below.  Keys: q quit, s sort, p pause, Enter details.

The input is read in a thread of its own (the run's intervals); each interval
reaches the screen through ``call_from_thread``, so the view never touches the
analyzer.  Fits 80×24: a header line, the table, eight lines of events, the
key line.
"""

import threading
from collections import deque

import numpy as np
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, RichLog, Static

from . import words
from .inputs import WatchError
from .stats import OPS, percentile

#: (key, title, width) of the table's columns: 80 characters with their spaces (errors by
#: name are in the path's details and the event log)
COLUMNS = (("path", "SESSION / PATH", 21), ("state", "STATE", 8), ("iops", "R/W IOPS", 9),
           ("mbs", "R/W MB/s", 9), ("lat", "p50/p99ms", 10), ("queue", "INFL/QD", 8),
           ("errors", "ERR", 4), ("rtx", "RTX", 4), ("rc", "RC", 3), ("hb", "HB", 4))
SORTS = ("session", "iops", "throughput", "latency", "errors")
EVENT_LINES = 500       # kept in the log
PATH_EVENTS = 8         # kept per path for its details


def _iops(row):
    return sum(row.stats.ops[op].count for op in OPS)


def _bytes(row):
    return sum(row.stats.ops[op].bytes for op in OPS)


def _p99(row):
    values = [row.stats.ops[op].latency_us()["p99"] or 0 for op in OPS]
    return max(values)


SORT_KEYS = {"iops": _iops, "throughput": _bytes, "latency": _p99,
             "errors": lambda row: sum(row.stats.errors.values())}


class Details(ModalScreen):
    """A path's details; any of Escape, Enter or q closes it."""
    BINDINGS = [Binding("escape,enter,q", "dismiss", "close")]
    DEFAULT_CSS = """
    Details { align: center middle; }
    Details > Static { width: 78; height: auto; max-height: 22; border: round $accent;
                       background: $surface; padding: 0 1; }
    """

    def __init__(self, text):
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        yield Static(self.text, markup=False)


class WatchApp(App):
    TITLE = "rtrs watch"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [Binding("q", "quit_watch", "quit"), Binding("s", "sort", "sort"),
                Binding("p", "pause", "pause"), Binding("enter", "details", "details")]
    DEFAULT_CSS = """
    #status { height: 1; background: $primary-background; }
    #paths { height: 1fr; }
    #events { height: 8; border-top: solid $secondary; }
    """

    def __init__(self, run, exporter, source_name):
        super().__init__()
        self.run_, self.exporter, self.source_name = run, exporter, source_name
        self.sort = 0
        self.paused = False
        self.ended = False
        self.latest = None          # the last interval read
        self.shown = None           # the interval on the screen (older while paused)
        self.totals = {}            # path id -> {op: [count, bytes], "errors": {}}
        self.path_events = {}       # path id -> recent events
        self.error = None

    def compose(self) -> ComposeResult:
        yield Static("", id="status", markup=False)
        with Vertical():
            table = DataTable(id="paths", cursor_type="row", cell_padding=0)
            yield table
            yield RichLog(id="events", max_lines=EVENT_LINES, wrap=False, markup=False,
                          min_width=20)
        yield Footer()

    def on_mount(self):
        table = self.query_one("#paths", DataTable)
        for key, title, width in COLUMNS:
            table.add_column(title, width=width, key=key)
        self._status()
        threading.Thread(target=self._read, name="rtrs-watch", daemon=True).start()

    # -- the reading thread --------------------------------------------------------

    def _read(self):
        try:
            for interval in self.run_.intervals():
                if self.exporter is not None:
                    self.exporter.add(interval)
                self.call_from_thread(self._interval, interval)
            self.call_from_thread(self._ended)
        except WatchError as exc:
            self.call_from_thread(self._failed, str(exc))
        except RuntimeError:      # the app closed while an interval was on its way
            pass

    def _failed(self, message):
        self.error = message
        self.exit(message)

    def _ended(self):
        self.ended = True
        self._status()

    # -- what an interval changes --------------------------------------------------

    def _interval(self, interval):
        log = self.query_one("#events", RichLog)
        for event in interval.events:
            log.write(words.event_line(event))
        for row in interval.paths:
            totals = self.totals.setdefault(row.id, {op: [0, 0] for op in OPS})
            for op in OPS:
                totals[op][0] += row.stats.ops[op].count
                totals[op][1] += row.stats.ops[op].bytes
            errors = totals.setdefault("errors", {})
            for name, n in row.stats.errors.items():
                errors[name] = errors.get(name, 0) + n
        for row in interval.paths if interval.events else ():
            mine = [e for e in interval.events if (e["sess_uuid"], e["client"], e["server"])
                    == (row.sess_uuid, row.client, row.server)]
            if mine:
                self.path_events.setdefault(row.id, deque(maxlen=PATH_EVENTS)).extend(mine)
        in_view = {row.id for row in interval.paths}
        for pid in [p for p in self.totals if p not in in_view]:   # aged out
            del self.totals[pid]
            self.path_events.pop(pid, None)
        self.latest = interval
        if not self.paused:
            self._table(interval)
        self._status()

    def _status(self):
        shown = self.shown
        when = words.clock(shown.end) + "Z" if shown else "waiting for packets"
        flags = [s for s, on in (("PAUSED", self.paused), ("ended", self.ended)) if on]
        text = "rtrs watch  %s  %s  %gs  sort %s  %s" % (
            self.source_name, when, self.run_.seconds, SORTS[self.sort], " ".join(flags))
        self.query_one("#status", Static).update(text)

    def _table(self, interval):
        self.shown = interval
        table = self.query_one("#paths", DataTable)
        selected = self._selected()
        table.clear()
        seconds = interval.seconds or self.run_.seconds
        for session, rows in self._grouped(interval.paths):
            table.add_row(session[:COLUMNS[0][2] - 1], *[""] * (len(COLUMNS) - 1),
                          key="s:%s" % session)
            for row in rows:
                table.add_row(*self._cells(row, seconds), key="p:%d" % row.id)
        if selected is not None:
            keys = [key.value for key in table.rows]
            if selected in keys:
                table.move_cursor(row=keys.index(selected))

    def _grouped(self, rows):
        sessions = {}
        for row in rows:
            sessions.setdefault(row.session, []).append(row)
        key = SORT_KEYS.get(SORTS[self.sort])
        groups = list(sessions.items())
        if key is None:
            return sorted(groups, key=lambda g: g[0])
        for _, members in groups:
            members.sort(key=key, reverse=True)
        return sorted(groups, key=lambda g: -max(key(r) for r in g[1]))

    @staticmethod
    def _cells(row, seconds):
        ops = row.stats.ops
        lat = np.concatenate([ops[op].latencies_ns for op in OPS])
        if len(lat):
            lat.sort()
            latency = "%s/%s" % (words.milliseconds(percentile(lat, 50) / 1e3),
                                 words.milliseconds(percentile(lat, 99) / 1e3))
        else:
            latency = "-"
        width = COLUMNS[0][2] - 1
        name = words.path_name(row)
        name = name if len(name) <= width else name[:width - 1] + "…"
        return (" " + name, row.state[:COLUMNS[1][2] - 1],
                "%s/%s" % (words.count(words.rate(ops["read"].count, seconds)),
                           words.count(words.rate(ops["write"].count, seconds))),
                "%s/%s" % (words.megabytes(ops["read"].bytes, seconds),
                           words.megabytes(ops["write"].bytes, seconds)),
                latency, "%d/%s" % (row.inflight, row.queue_depth or "?"),
                words.count(sum(row.stats.errors.values())),
                words.count(row.retransmissions),
                str(row.reconnects_total),
                words.heartbeat(row.heartbeat_age_s))

    def _selected(self):
        table = self.query_one("#paths", DataTable)
        if not table.row_count:
            return None
        try:
            return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        except Exception:   # noqa: BLE001 - no row under the cursor
            return None

    # -- keys ---------------------------------------------------------------------

    def action_quit_watch(self):
        self.run_.stop.set()
        self.exit(self.error)

    def action_sort(self):
        self.sort = (self.sort + 1) % len(SORTS)
        if self.shown is not None:
            self._table(self.shown)
        self._status()

    def action_pause(self):
        self.paused = not self.paused
        if not self.paused and self.latest is not None:
            self._table(self.latest)
        self._status()

    def on_data_table_row_selected(self, message):
        self.action_details()

    def action_details(self):
        key = self._selected()
        if key is None or not key.startswith("p:") or self.shown is None:
            return
        pid = int(key[2:])
        row = next((r for r in self.shown.paths if r.id == pid), None)
        if row is None:
            return
        totals = self.totals.get(pid) or {op: [0, 0] for op in OPS}
        totals.setdefault("errors", {})
        text = words.details(row, totals, self.shown.seconds or self.run_.seconds,
                             list(self.path_events.get(pid, ())))
        self.push_screen(Details(text))
