"""The BeeGFS verdict (issue 26): a run whose BeeGFS server had every worker busy with
requests queued stores ``bottleneck = "beegfs"``, and a configuration's summary counts such
runs (``bn_beegfs``) like the other kinds. Nothing else changes: older runs keep their
verdicts (``manage.py refresh_verdicts`` recomputes them), and their documents have no
``beegfs_*`` series."""

from django.db import migrations, models


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
    ]
