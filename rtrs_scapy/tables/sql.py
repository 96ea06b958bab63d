"""DuckDB over the tables, in place: views ``ios``, ``messages``, ``sessions``,
``paths`` and ``events`` on the Parquet files of an export folder (every
capture exported into it), or on a capture exported on the fly.

A table whose folder holds no file is an empty view with the table's schema,
so a query never fails for want of a table.  Files written by another MAJOR
schema version are refused rather than read wrong.
"""

import contextlib
import glob
import os
import tempfile

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from .schema import META_TABLE, META_VERSION, SCHEMA_VERSION, TABLES, schema


class TablesError(Exception):
    """A folder that cannot be read as tables."""


def is_tables_dir(path):
    """Whether ``path`` is an export folder (a folder per table with Parquet files)."""
    return os.path.isdir(path) and any(
        glob.glob(os.path.join(path, table, "*.parquet")) for table in TABLES)


def _check(files, table):
    major = SCHEMA_VERSION.split(".")[0]
    for name in files:
        meta = pq.read_schema(name).metadata or {}
        version = meta.get(META_VERSION, b"").decode()
        if meta.get(META_TABLE, b"").decode() != table or version.split(".")[0] != major:
            raise TablesError("%s: not an rtrs-scapy %s table of schema version %s.x "
                              "(it says %s %s)" % (name, table, major,
                                                   meta.get(META_TABLE, b"?").decode(),
                                                   version or "?"))


def _times_as_computed(table):
    """``* REPLACE`` list that gives each time column as UTC TIMESTAMP_NS: DuckDB has no
    arithmetic on TIMESTAMPTZ_NS (``response_time - time`` failed), and the
    nanoseconds of the capture stay."""
    times = [f.name for f in schema(table) if pa.types.is_timestamp(f.type) and f.type.tz]
    if not times:
        return ""
    return " REPLACE (%s)" % ", ".join('CAST("%s" AS TIMESTAMP_NS) AS "%s"' % (n, n)
                                       for n in times)


def connect(tables_dir):
    """A DuckDB connection with one view per table over ``tables_dir`` (times in UTC)."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    for table in TABLES:
        files = sorted(glob.glob(os.path.join(tables_dir, table, "*.parquet")))
        _check(files, table)
        if files:
            listing = ", ".join("'%s'" % f.replace("'", "''") for f in files)
            source = "read_parquet([%s], union_by_name = true)" % listing
        else:
            con.register("empty_" + table, schema(table).empty_table())
            source = "empty_" + table
        con.execute("CREATE VIEW %s AS SELECT *%s FROM %s" % (table, _times_as_computed(table),
                                                              source))
    return con


@contextlib.contextmanager
def connect_any(sources, export_tables=None):
    """A connection over an export folder, or over captures exported into a
    temporary folder first (``export_tables(captures, folder)`` does that)."""
    if len(sources) == 1 and is_tables_dir(sources[0]):
        con = connect(sources[0])
        try:
            yield con
        finally:
            con.close()
        return
    with tempfile.TemporaryDirectory(prefix="rtrs-tables-") as folder:
        export_tables(sources, folder)
        con = connect(folder)
        try:
            yield con
        finally:
            con.close()


def query(con, text):
    """(column names, rows) of a query."""
    cursor = con.execute(text)
    names = [d[0] for d in cursor.description] if cursor.description else []
    return names, cursor.fetchall()
