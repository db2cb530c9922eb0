"""Indexes the bulk ingest kept up for nothing (issue 17, bench/RESULTS.md "Bulk ingest: the
PostgreSQL half"):

- exp_metric_name_primary (name, primary, run): every lookup of one metric's primary rows is
  served by exp_metric_primary_value (name, value, run) WHERE primary;
- the plain indexes of Run.matrix and Run.testbed: exp_run_matrix_status (matrix, status) and
  exp_run_testbed_created_id (testbed, -created, -id) lead with the same column;
- Run.bottleneck's varchar_pattern_ops copy (PostgreSQL; for LIKE, which nothing asks): the
  plain index stays, renamed exp_run_bottleneck (a Meta index).

Only the indexes are dropped (Django's AlterField of a foreign key's db_index would also drop
and re-validate the constraint over every run); the rename keeps the index built.
"""

from django.db import migrations, models

DROPPED = (
    "experiments_run_matrix_id_feeb22cf",
    "experiments_run_testbed_id_c7ce9e57",
)


def forwards(apps, schema_editor):
    pg = schema_editor.connection.vendor == "postgresql"
    for name in DROPPED:
        schema_editor.execute(f'DROP INDEX IF EXISTS "{name}"')
    if pg:
        schema_editor.execute('DROP INDEX IF EXISTS "experiments_run_bottleneck_0b7e1e29_like"')
        schema_editor.execute(
            'ALTER INDEX "experiments_run_bottleneck_0b7e1e29" RENAME TO "exp_run_bottleneck"'
        )
    else:
        schema_editor.execute('DROP INDEX IF EXISTS "experiments_run_bottleneck_0b7e1e29"')
        schema_editor.execute(
            'CREATE INDEX "exp_run_bottleneck" ON "experiments_run" ("bottleneck")'
        )


def backwards(apps, schema_editor):
    pg = schema_editor.connection.vendor == "postgresql"
    schema_editor.execute(
        'CREATE INDEX "experiments_run_matrix_id_feeb22cf" ON "experiments_run" ("matrix_id")'
    )
    schema_editor.execute(
        'CREATE INDEX "experiments_run_testbed_id_c7ce9e57" ON "experiments_run" ("testbed_id")'
    )
    if pg:
        schema_editor.execute(
            'ALTER INDEX "exp_run_bottleneck" RENAME TO "experiments_run_bottleneck_0b7e1e29"'
        )
        schema_editor.execute(
            'CREATE INDEX "experiments_run_bottleneck_0b7e1e29_like" ON "experiments_run" '
            '("bottleneck" varchar_pattern_ops)'
        )
    else:
        schema_editor.execute('DROP INDEX "exp_run_bottleneck"')
        schema_editor.execute(
            'CREATE INDEX "experiments_run_bottleneck_0b7e1e29" ON "experiments_run" ("bottleneck")'
        )


class Migration(migrations.Migration):
    dependencies = [
        ("experiments", "0020_summary_append"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="metric",
            name="exp_metric_name_primary",
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="run",
                    name="bottleneck",
                    field=models.CharField(
                        blank=True,
                        help_text="disk, cpu, network, none (latency-bound), unknown; empty: no "
                        "telemetry.",
                        max_length=8,
                    ),
                ),
                migrations.AlterField(
                    model_name="run",
                    name="matrix",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=models.deletion.CASCADE,
                        related_name="runs",
                        to="experiments.matrix",
                    ),
                ),
                migrations.AlterField(
                    model_name="run",
                    name="testbed",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=models.deletion.PROTECT,
                        related_name="runs",
                        to="experiments.testbed",
                    ),
                ),
                migrations.AddIndex(
                    model_name="run",
                    index=models.Index(fields=["bottleneck"], name="exp_run_bottleneck"),
                ),
            ],
            database_operations=[migrations.RunPython(forwards, backwards)],
        ),
    ]
