"""Runs' parameters as typed rows (experiments.models.params, issue 30): the table, its rows
for the runs stored so far (on PostgreSQL before its indexes, which are then built once
over the filled table, faster than kept up row by row), and the triggers that keep it
true."""

from django.db import migrations, models


def fill(apps, schema_editor):
    from experiments.models import params

    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        params.backfill(connection)
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT conname FROM pg_constraint "
            "WHERE conrelid = 'experiments_runparam'::regclass AND contype = 'p'"
        )
        (key,) = cursor.fetchone()
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes "
            "WHERE tablename = 'experiments_runparam' AND indexname <> %s",
            [key],
        )
        indexes = cursor.fetchall()
        for name, _ in indexes:
            cursor.execute(f'DROP INDEX "{name}"')
        cursor.execute(f'ALTER TABLE experiments_runparam DROP CONSTRAINT "{key}"')
        params.backfill(connection)
        cursor.execute(
            f'ALTER TABLE experiments_runparam ADD CONSTRAINT "{key}" '
            "PRIMARY KEY (name, kind, num, text, created, run_id)"
        )
        for _, definition in indexes:
            cursor.execute(definition)
        # Which values a parameter takes: without it the planner multiplies the shares of
        # the name and of the value as if they were independent.
        cursor.execute(
            "CREATE STATISTICS IF NOT EXISTS exp_runparam_name_value (mcv) "
            "ON name, kind, num, text FROM experiments_runparam"
        )


def install(apps, schema_editor):
    from experiments.models import params

    params.install(schema_editor.connection)


def uninstall(apps, schema_editor):
    from experiments.models import params

    params.uninstall(schema_editor.connection)


def analyze(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        with schema_editor.connection.cursor() as cursor:
            cursor.execute("ANALYZE experiments_runparam")


class Migration(migrations.Migration):
    dependencies = [
        ("experiments", "0029_matrix_pages"),
    ]

    operations = [
        migrations.CreateModel(
            name="RunParam",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "name",
                        "kind",
                        "num",
                        "text",
                        "created",
                        "run_id",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("name", models.TextField()),
                ("kind", models.SmallIntegerField()),
                ("num", models.FloatField()),
                ("text", models.TextField()),
                ("created", models.DateTimeField()),
                (
                    "run",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=models.deletion.DO_NOTHING,
                        related_name="typed_params",
                        to="experiments.run",
                    ),
                ),
            ],
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
        migrations.RunPython(install, uninstall),
        migrations.RunPython(analyze, migrations.RunPython.noop),
    ]
