"""Runs' parameters as typed rows, so that the runs table sorts and filters by any parameter
from an index (issue 30).

``Run.params`` is a JSON object: sorting a million runs by ``params->'threads'`` or filtering
them by ``params->'threads' = 16`` reads every run (400-500 ms at 1M runs), and no single
index serves every parameter name. ``RunParam`` holds one row per (run, parameter) with the
value typed: ``kind`` 0 with ``num`` for a JSON number (numeric order: 2 < 16), ``kind`` 1
with ``text`` for anything else (a string as itself, ``true``/``false``, a list or an object
as JSON text), cut to ``TEXT_PREFIX`` characters so that any value fits an index entry. A
JSON null, a key longer than ``NAME_MAX`` (no table column can name it) and a ``params``
that is not an object make no row: the parameter is missing, as for a run without it.

One index, the primary key (name, kind, num, text, created, run), serves everything: a sort
by the parameter (its numbers in order, then its texts; ties by the run's creation, then id),
a filter on it shown newest first, a run's own row (every column of the key is known from the
run: its id, creation and value), and the triggers' deletes. The unused half of the value is
a constant (``num`` 0 for a text, ``text`` '' for a number), so no column is null. A second
index, on ``run``, serves a filter that leaves few runs sorted by a parameter. What the rows
cost a bulk ingest: ``bench/params_ingest.py``.

The rows are kept true by the database itself, whatever writes the run: triggers on
``experiments_run`` (``install``) write a run's rows when it is inserted (on PostgreSQL once
per statement, from the statement's new rows: one ``INSERT … SELECT`` for a bulk ingest's
whole COPY), rewrite them when its ``params`` or ``created`` change, and delete them with it
(by their keys, made again from the old row). So the ORM, the bulk ingest's COPY, the
executor, the importers, the published data loader, ``bench/generate.py`` and plain SQL need
do nothing. The migration that made the table filled it for the runs of the time
(``backfill``); ``install`` runs again after every ``migrate`` (post_migrate), since SQLite
drops a table's triggers when a migration rebuilds the table. Changing how a value is typed
takes a migration that fills the table again (the deletes find rows by the keys made now).
"""

from __future__ import annotations

import json

from django.db import models

from experiments.models.runs import Run

TEXT_PREFIX = 256
NAME_MAX = 64


NUMBER, TEXT = 0, 1


class RunParam(models.Model):
    """One parameter of one run, typed (see the module's docstring). Written by triggers only."""

    pk = models.CompositePrimaryKey("name", "kind", "num", "text", "created", "run_id")
    # No foreign-key constraint: the rows are written from the run's own row by a trigger and
    # deleted with it by another, and a constraint would cost a check per row (ten a run) on
    # every bulk ingest. DO_NOTHING: the delete trigger removes them, not the ORM's collector.
    # Indexed on its own (an append at the index's end, the cheapest entry): a filter that
    # leaves few runs (one matrix, a tool) and sorts them by a parameter reads those runs'
    # rows rather than walk the parameter's whole index.
    run = models.ForeignKey(
        Run,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="typed_params",
    )
    name = models.TextField()
    kind = models.SmallIntegerField()  # NUMBER or TEXT
    num = models.FloatField()  # the number; 0 for a text
    text = models.TextField()  # the text; '' for a number
    created = models.DateTimeField()

    def __str__(self) -> str:
        value = self.text if self.kind == TEXT else f"{self.num:g}"
        return f"run {self.run_id}: {self.name}={value}"


def typed(value) -> tuple[int, float, str] | None:
    """(kind, num, text) of a parameter value as the triggers type it, or None for no row:
    what the filters look up and the tests check the rows against."""
    if value is None:
        return None
    if isinstance(value, bool):
        return TEXT, 0.0, "true" if value else "false"
    if isinstance(value, (int, float)):
        if value == 0 or 1e-300 <= abs(value) <= 1e300:
            return NUMBER, float(value), ""
        return TEXT, 0.0, json.dumps(value)[:TEXT_PREFIX]
    if isinstance(value, str):
        return TEXT, 0.0, value[:TEXT_PREFIX]
    return TEXT, 0.0, json.dumps(value, separators=(",", ":"))[:TEXT_PREFIX]


# -- the triggers -----------------------------------------------------------------------------

# PostgreSQL: the typed rows of the runs of a row source ``src`` (alias ``n``) with columns id,
# params (jsonb), created. A number outside float8's range goes to ``text`` (a cast would fail
# the insert); PostgreSQL's JSON text of a list or an object spaces its items ("[1, 2]").
_PG_ROWS = f"""
    SELECT n.id AS run_id, e.key AS name,
           CASE WHEN w.number THEN 0 ELSE 1 END AS kind,
           CASE WHEN w.number THEN v.x::float8 ELSE 0 END AS num,
           CASE WHEN w.number THEN ''
                WHEN jsonb_typeof(e.value) = 'string' THEN left(e.value #>> '{{}}', {TEXT_PREFIX})
                ELSE left(e.value::text, {TEXT_PREFIX}) END AS text,
           n.created AS created
      FROM __SRC__ n,
           jsonb_each(CASE WHEN jsonb_typeof(n.params) = 'object' THEN n.params
                           ELSE '{{}}'::jsonb END) e,
           LATERAL (SELECT CASE WHEN jsonb_typeof(e.value) = 'number'
                                THEN e.value::numeric END AS x) v,
           LATERAL (SELECT coalesce(v.x = 0 OR abs(v.x) BETWEEN 1e-300 AND 1e300, false)
                               AS number) w
     WHERE jsonb_typeof(e.value) <> 'null' AND length(e.key) <= {NAME_MAX}
"""

_COLUMNS = "run_id, name, kind, num, text, created"
# The rows of the runs of ``gone`` (their keys made again from the old rows), deleted.
_PG_DELETE = """
    DELETE FROM experiments_runparam p
     USING (__ROWS__) g
     WHERE (p.name, p.kind, p.num, p.text, p.created, p.run_id)
         = (g.name, g.kind, g.num, g.text, g.created, g.run_id)
"""

_PG_INSTALL = [
    f"""
CREATE OR REPLACE FUNCTION experiments_run_params_added() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO experiments_runparam ({_COLUMNS})
    {_PG_ROWS.replace("__SRC__", "added")};
    RETURN NULL;
END $$
""",
    # A run's rows are those of its old parameters and creation time, and no others: they go
    # by the run index (0.18 ms of the trigger's 0.36 at a million runs, where making their
    # keys again from OLD took the rest; the executor's outcome sets the parsed parameters of
    # every run it stores).
    f"""
CREATE OR REPLACE FUNCTION experiments_run_params_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM experiments_runparam WHERE run_id = OLD.id;
    INSERT INTO experiments_runparam ({_COLUMNS})
    {_PG_ROWS.replace("__SRC__", "(SELECT NEW.*)")};
    RETURN NULL;
END $$
""",
    f"""
CREATE OR REPLACE FUNCTION experiments_run_params_gone() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    {_PG_DELETE.replace("__ROWS__", _PG_ROWS.replace("__SRC__", "gone"))};
    RETURN NULL;
END $$
""",
    """
CREATE OR REPLACE FUNCTION experiments_run_params_truncated() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- A TRUNCATE naming both tables (Django's flush) has emptied the parameter rows already,
    -- and PostgreSQL refuses a TRUNCATE of a table its statement is using.
    IF EXISTS (SELECT 1 FROM experiments_runparam) THEN
        TRUNCATE experiments_runparam;
    END IF;
    RETURN NULL;
END $$
""",
    # One INSERT … SELECT per statement (a bulk ingest's COPY of 500 runs: one), not one
    # function call per run.
    """
CREATE OR REPLACE TRIGGER experiments_run_params_added AFTER INSERT ON experiments_run
REFERENCING NEW TABLE AS added FOR EACH STATEMENT
EXECUTE FUNCTION experiments_run_params_added()
""",
    # Per row, and only when the parameters or the creation time change: the executor's
    # heartbeats and status updates, which set neither, cost nothing more than the test.
    """
CREATE OR REPLACE TRIGGER experiments_run_params_changed
AFTER UPDATE OF params, created ON experiments_run FOR EACH ROW
WHEN (OLD.params IS DISTINCT FROM NEW.params OR OLD.created IS DISTINCT FROM NEW.created)
EXECUTE FUNCTION experiments_run_params_changed()
""",
    """
CREATE OR REPLACE TRIGGER experiments_run_params_gone AFTER DELETE ON experiments_run
REFERENCING OLD TABLE AS gone FOR EACH STATEMENT
EXECUTE FUNCTION experiments_run_params_gone()
""",
    """
CREATE OR REPLACE TRIGGER experiments_run_params_truncated AFTER TRUNCATE ON experiments_run
FOR EACH STATEMENT EXECUTE FUNCTION experiments_run_params_truncated()
""",
]

# SQLite (the embedded default): row triggers with json_each. A list or an object is its JSON
# text as SQLite writes it ("[1,2]").
_SQLITE_ROWS = f"""
    SELECT NEW.id AS run_id, e.key AS name,
           CASE WHEN e.type IN ('integer', 'real') THEN 0 ELSE 1 END AS kind,
           CASE WHEN e.type IN ('integer', 'real') THEN e.value ELSE 0 END AS num,
           CASE WHEN e.type IN ('integer', 'real') THEN ''
                WHEN e.type = 'text' THEN substr(e.value, 1, {TEXT_PREFIX})
                WHEN e.type IN ('true', 'false') THEN e.type
                ELSE substr(e.value, 1, {TEXT_PREFIX}) END AS text,
           NEW.created AS created
      FROM json_each(CASE WHEN json_valid(NEW.params) AND json_type(NEW.params) = 'object'
                          THEN NEW.params ELSE '{{}}' END) e
     WHERE e.type <> 'null' AND length(e.key) <= {NAME_MAX}
"""
_SQLITE_DELETE = f"""
    DELETE FROM experiments_runparam
     WHERE (name, kind, num, text, created, run_id) IN (
           SELECT name, kind, num, text, created, run_id FROM (
           {_SQLITE_ROWS.replace("NEW.", "OLD.")}));
"""

_SQLITE_INSTALL = [
    f"""
CREATE TRIGGER IF NOT EXISTS experiments_run_params_added AFTER INSERT ON experiments_run
BEGIN
    INSERT INTO experiments_runparam ({_COLUMNS}) {_SQLITE_ROWS};
END
""",
    f"""
CREATE TRIGGER IF NOT EXISTS experiments_run_params_changed
AFTER UPDATE OF params, created ON experiments_run
WHEN OLD.params IS NOT NEW.params OR OLD.created IS NOT NEW.created
BEGIN
    {_SQLITE_DELETE}
    INSERT INTO experiments_runparam ({_COLUMNS}) {_SQLITE_ROWS};
END
""",
    f"""
CREATE TRIGGER IF NOT EXISTS experiments_run_params_gone AFTER DELETE ON experiments_run
BEGIN
    {_SQLITE_DELETE}
END
""",
]

_PG_UNINSTALL = [
    "DROP TRIGGER IF EXISTS experiments_run_params_added ON experiments_run",
    "DROP TRIGGER IF EXISTS experiments_run_params_changed ON experiments_run",
    "DROP TRIGGER IF EXISTS experiments_run_params_gone ON experiments_run",
    "DROP TRIGGER IF EXISTS experiments_run_params_truncated ON experiments_run",
    "DROP FUNCTION IF EXISTS experiments_run_params_added()",
    "DROP FUNCTION IF EXISTS experiments_run_params_changed()",
    "DROP FUNCTION IF EXISTS experiments_run_params_gone()",
    "DROP FUNCTION IF EXISTS experiments_run_params_truncated()",
]

_SQLITE_UNINSTALL = [
    "DROP TRIGGER IF EXISTS experiments_run_params_added",
    "DROP TRIGGER IF EXISTS experiments_run_params_changed",
    "DROP TRIGGER IF EXISTS experiments_run_params_gone",
]


def _tables(connection) -> set[str]:
    with connection.cursor() as cursor:
        return set(connection.introspection.table_names(cursor))


def install(connection) -> None:
    """Create (or replace) the triggers that keep the typed rows true; idempotent. Nothing
    before the table exists (a migrate that has not reached it yet)."""
    if not {"experiments_run", "experiments_runparam"} <= _tables(connection):
        return
    statements = _PG_INSTALL if connection.vendor == "postgresql" else _SQLITE_INSTALL
    with connection.cursor() as cursor:
        for sql in statements:
            cursor.execute(sql)


def uninstall(connection) -> None:
    statements = _PG_UNINSTALL if connection.vendor == "postgresql" else _SQLITE_UNINSTALL
    with connection.cursor() as cursor:
        for sql in statements:
            cursor.execute(sql)


def backfill(connection) -> None:
    """The typed rows of every run (the migration's, on the runs stored before the triggers)."""
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM experiments_runparam")
        if connection.vendor == "postgresql":
            cursor.execute(
                f"INSERT INTO experiments_runparam ({_COLUMNS}) "
                + _PG_ROWS.replace("__SRC__", "experiments_run")
            )
        else:
            rows = _SQLITE_ROWS.replace("NEW.", "n.")
            rows = rows.replace("FROM json_each(", "FROM experiments_run n, json_each(", 1)
            cursor.execute(f"INSERT INTO experiments_runparam ({_COLUMNS}) " + rows)


def installed(connection) -> set[str]:
    """The names of the triggers in place (for the checks and tests)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = 'experiments_run'::regclass "
                "AND tgname LIKE 'experiments_run_params_%%'"
            )
        else:
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' "
                "AND name LIKE 'experiments_run_params_%'"
            )
        return {row[0] for row in cursor.fetchall()}
