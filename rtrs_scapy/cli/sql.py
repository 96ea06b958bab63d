"""``rtrs-dissect sql``: DuckDB over the tables of an export folder or of captures."""

import csv
import datetime
import json
import sys

import click

from .common import queue_depth_option
from .scale import run_options, scale_imports


@click.command()
@click.argument("query")
@click.argument("sources", nargs=-1, required=True, type=click.Path(allow_dash=True))
@click.option("--format", "fmt", type=click.Choice(["text", "csv", "json"]), default="text",
              show_default=True, help="text: aligned columns; csv; json: one object per row.")
@queue_depth_option
@run_options
def sql(query, sources, fmt, queue_depth, jobs, dask):
    """Run the SQL QUERY (DuckDB) over the tables ios, messages, sessions, paths, events.

    SOURCES: an export folder (rtrs-dissect export -o DIR), or captures (files, -,
    directories: one capture), exported into a temporary folder first.  Columns:
    docs/TABLES.md.  Times are UTC.
    """
    scale_imports("pyarrow", "duckdb")
    import duckdb
    from ..tables.schema import TABLES
    from ..tables.sql import TablesError, connect_any, query as run_query
    from .export import write_tables

    def export_tables(captures, folder):
        write_tables(captures, folder, TABLES, True, queue_depth, jobs, dask)

    try:
        with connect_any(list(sources), export_tables) as con:
            names, rows = run_query(con, query)
    except TablesError as exc:
        raise click.ClickException(str(exc)) from None
    except duckdb.Error as exc:
        raise click.UsageError(str(exc).strip()) from None
    WRITERS[fmt](names, rows)


def _text(value):
    if value is None:
        return "NULL"
    if isinstance(value, datetime.datetime):   # the connection's clock is UTC
        if value.tzinfo:
            value = value.astimezone(datetime.timezone.utc)
        return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, float):
        return repr(round(value, 3))
    return str(value)


def _json(value):
    if isinstance(value, (datetime.datetime, datetime.date)):
        return _text(value)
    return str(value)


def _write_text(names, rows):
    """Columns under a header, numbers to the right."""
    cells = [[_text(v) for v in row] for row in rows]
    widths = [max([len(n)] + [len(r[i]) for r in cells]) for i, n in enumerate(names)]
    numeric = [all(isinstance(row[i], (int, float)) or row[i] is None for row in rows)
               for i in range(len(names))]

    def line(values):
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric)).rstrip()
    click.echo(line(names))
    for row in cells:
        click.echo(line(row))


def _write_csv(names, rows):
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(names)
    for row in rows:
        out.writerow(["" if v is None else _text(v) for v in row])


def _write_json(names, rows):
    for row in rows:
        click.echo(json.dumps(dict(zip(names, row)), default=_json))


WRITERS = {"text": _write_text, "csv": _write_csv, "json": _write_json}
