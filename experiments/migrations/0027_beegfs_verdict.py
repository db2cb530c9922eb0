"""The BeeGFS verdict (issue 26): a run whose BeeGFS server had every worker busy with
requests queued stores ``bottleneck = "beegfs"``, and a configuration's summary counts such
runs (``bn_beegfs``) like the other kinds. Nothing else changes: older runs keep their
verdicts (``manage.py refresh_verdicts`` recomputes them), and their documents have no
``beegfs_*`` series. The summaries are rebuilt once the column exists (0019 and 0023 leave
it to this one on a database they find without it)."""

from django.db import migrations, models


def summarise(apps, schema_editor):
    from experiments.results import summaries

    summaries.rebuild_in_migration(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("experiments", "0023_param_normal_forms"),
    ]

    operations = [
        migrations.AddField(
            model_name="configsummary",
            name="bn_beegfs",
            field=models.IntegerField(default=0),
        ),
        migrations.AlterField(
            model_name="run",
            name="bottleneck",
            field=models.CharField(
                blank=True,
                help_text="disk, cpu, network, beegfs (a BeeGFS server's workers), none (latency-bound), unknown; empty: no telemetry.",
                max_length=8,
            ),
        ),
        migrations.RunPython(summarise, migrations.RunPython.noop),
    ]
