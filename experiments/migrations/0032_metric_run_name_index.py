"""Issue 30: the runs table sorted by a metric under a parameter filter.

- ``exp_metric_run_name`` on (run, name) including value and primary takes the place of the
  metric's foreign key index on (run): the same number of index entries per metric row, and
  one metric's values of many runs read from the index alone.

The new index is built before the old one is dropped."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("experiments", "0031_history_indexes"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="metric",
            index=models.Index(
                fields=["run", "name"], include=("value", "primary"), name="exp_metric_run_name"
            ),
        ),
        migrations.AlterField(
            model_name="metric",
            name="run",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="metrics",
                to="experiments.run",
            ),
        ),
    ]
