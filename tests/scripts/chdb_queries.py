#!/usr/bin/env python3
"""The shipped ClickHouse schema, TTL and queries on chdb (the current ClickHouse engine,
in-process), over the rows `roce-analyzer clickhouse-rows` made of export files.

usage: chdb_queries.py DEPLOY_DIR ROWS_DIR
Prints one JSON object: {"version": ..., "queries": {file: [rows...]}}; exits non-zero on any
error (a statement the current server refuses is a failure, never skipped)."""
import json
import os
import re
import sys

from chdb import session


def statements(path):
    text = "\n".join(line.split("--")[0] for line in open(path).read().splitlines())
    return [s.strip() for s in text.split(";") if s.strip()]


def main():
    deploy, rows = sys.argv[1], sys.argv[2]
    s = session.Session()
    for f in ("schema.sql", "ttl.sql"):
        for st in statements(os.path.join(deploy, "clickhouse", f)):
            s.query(st)
    # Every table the schema creates has its file of rows (an empty one when no line made any).
    tables = s.query("SELECT name FROM system.tables WHERE database = 'roce' ORDER BY name", "CSV")
    for table in (t.strip('"') for t in tables.bytes().decode().split()):
        path = os.path.join(rows, table + ".ndjson")
        if os.path.getsize(path) == 0:
            continue
        cols = s.query(f"SELECT name, type FROM system.columns WHERE database = 'roce' AND table = '{table}' "
                       "ORDER BY position", "JSONEachRow").bytes().decode()
        structure = ", ".join(f"`{c['name']}` {c['type']}" for c in map(json.loads, cols.splitlines()))
        s.query(f"INSERT INTO roce.{table} SELECT * FROM file('{path}', 'JSONEachRow', '{structure}')")
    out = {"version": s.query("SELECT version()", "CSV").bytes().decode().strip().strip('"'), "queries": {}}
    qdir = os.path.join(deploy, "clickhouse", "queries")
    for q in sorted(os.listdir(qdir)):
        sql = "\n".join(statements(os.path.join(qdir, q)))
        res = s.query(sql + "\nSETTINGS output_format_json_quote_64bit_integers = 0", "JSONEachRow").bytes().decode()
        out["queries"][q] = [json.loads(l) for l in res.splitlines() if l.strip()]
    ttl = s.query("SELECT count() FROM system.tables WHERE database = 'roce' AND create_table_query LIKE '%TTL%'",
                  "CSV").bytes().decode().strip()
    out["tables_with_ttl"] = int(ttl)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
