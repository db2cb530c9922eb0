"""The typed parameter rows' per-run trigger deletes a run's old rows by the run index
(experiments.models.params: the same rows, found without making their keys again)."""

from django.db import migrations


def install(apps, schema_editor):
    from experiments.models import params

    params.install(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [("experiments", "0032_metric_run_name_index")]

    # Reversed, the function stays as it is: it deletes the same rows either way.
    operations = [migrations.RunPython(install, migrations.RunPython.noop)]
