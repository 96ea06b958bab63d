"""A capture as tables: ``ios`` (one row per RTRS request), ``messages``,
``sessions``, ``paths`` and ``events``, written as Parquet through pyarrow and
queried with DuckDB (docs/TABLES.md says every column).

``schema`` holds the versioned schema, ``ios`` writes the IO rows while the
capture is read, ``build`` makes the other tables from the finished analysis,
``export`` writes them into a folder (each file's row groups encoded on a thread of
their own: ``encoding``), ``sql`` queries such a folder (or a capture, exported on
the fly).  Needs the ``scale`` extra (pyarrow, duckdb).
"""
