"""Plotly figures written as the JSON plotly.js draws: a list of traces and a layout,
each a dict of attributes named as in Plotly's figure reference.

plotly's Python figure objects check every attribute as it is set (about 30 ms a
figure, and the lazy import of a checker module per attribute the first time): with a
figure per path and session that was most of a report's time past the analysis.  The
report's figures are fixed code, so they are written as the dicts those objects would
have made.  The one piece of geometry, the grid of subplots (axis domains, anchors,
the subplot titles), is still plotly's own ``make_subplots``, worked out once per grid.
"""

import copy
from functools import lru_cache


class Figure:
    """A figure's traces and layout.  ``grid``: ``make_subplots``' keyword arguments
    (``rows``, ``cols``, ``row_heights``, ``subplot_titles``...) for a figure of
    subplots; none for a figure with one pair of axes."""

    def __init__(self, traces=(), layout=None, **grid):
        self.data = []
        if grid:
            cells, base = _grid(tuple((k, tuple(v) if isinstance(v, list) else v)
                                      for k, v in sorted(grid.items())))
            self._cells, self.layout = cells, copy.deepcopy(base)
        else:
            self._cells, self.layout = None, {}
        for kind, attributes in traces:
            self.add(kind, **attributes)
        merge(self.layout, layout or {})

    def add(self, kind, row=None, col=None, **attributes):
        """A trace of type ``kind`` ("scatter", "bar", "heatmap"), in the subplot at
        ``row``, ``col`` (from 1) of a grid."""
        trace = dict(attributes, type=kind)
        if self._cells is not None:
            x, y = self._cells[row - 1][col - 1]
            trace.update(xaxis=x.replace("axis", ""), yaxis=y.replace("axis", ""))
        self.data.append(trace)

    def xaxes(self, row=None, col=None, **attributes):
        self._axes(0, row, col, attributes)

    def yaxes(self, row=None, col=None, **attributes):
        self._axes(1, row, col, attributes)

    def _axes(self, which, row, col, attributes):
        """The axis of the subplot at ``row``, ``col``; of every subplot without them."""
        if self._cells is None:
            names = ["xy"[which] + "axis"]
        elif row is None:
            names = [cell[which] for cells in self._cells for cell in cells]
        else:
            names = [self._cells[row - 1][col - 1][which]]
        for name in names:
            merge(self.layout.setdefault(name, {}), attributes)

    def update(self, **attributes):
        merge(self.layout, attributes)

    def to_plotly_json(self):
        """``{"data": [...], "layout": {...}}``, as ``plotly.io`` and plotly.js read it."""
        return {"data": self.data, "layout": self.layout}


def merge(into, attributes):
    """Nested attributes set into ``into`` (a dict value merges, any other replaces)."""
    for key, value in attributes.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value


@lru_cache(maxsize=None)
def _grid(grid):
    """The axis names of each cell (row by row) and the layout of a grid of subplots."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots
    # the empty template: the page applies its own once (html.py)
    figure = make_subplots(figure=go.Figure(layout={"template": "none"}),
                           **{k: list(v) if isinstance(v, tuple) else v for k, v in grid})
    layout = figure.to_plotly_json()["layout"]
    layout.pop("template", None)
    rows, cols = dict(grid).get("rows", 1), dict(grid).get("cols", 1)
    cells = tuple(tuple((cell.xaxis.plotly_name, cell.yaxis.plotly_name)
                        for cell in (figure.get_subplot(r, c) for c in range(1, cols + 1)))
                  for r in range(1, rows + 1))
    return cells, layout
