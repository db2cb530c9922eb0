"""Run parameters in one normal form per kind (issue 25, finding 3): sizes in bytes, seconds,
booleans and whole numbers, whatever the tool or the user spelled ('1m' and 1048576, 'true'
and True, 8e12 and 8000000000000; ``runners.params``), then every configuration key and
summary rebuilt, since the key hashes the parameters (``summaries.rebuild``: the module, not
historical models, as 0019 does).

Only ``Run.params`` changes: ``Run.launch["params"]`` keeps what a run was launched with as it
was typed (what wins over the output is normalised whenever it is merged), and a matrix keeps
its definition as typed (its cell keys hash it: normalising it would make the next expansion
create its runs again). Backwards nothing changes: the normal forms are values every older
reader takes (the adapters read 1048576 as they read '1m').
"""

import json

from django.db import migrations

BATCH = 1000


def _text(params) -> str:
    # Types count: 8e12 == 8000000000000 in Python, but they are stored differently.
    return json.dumps(params, sort_keys=True, default=str)


def forwards(apps, schema_editor):
    from experiments.results import summaries
    from runners.params import normalise

    Run = apps.get_model("experiments", "Run")
    changed = []
    rows = Run.objects.order_by("pk").values_list("pk", "params")
    for pk, params in rows.iterator(chunk_size=5000):
        normal = normalise(params)
        if isinstance(normal, dict) and _text(normal) != _text(params):
            changed.append(Run(pk=pk, params=normal))
    for start in range(0, len(changed), BATCH):
        Run.objects.bulk_update(changed[start : start + BATCH], ["params"])
    if changed:
        summaries.rebuild_in_migration(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("experiments", "0022_runs_that_are_data"),
    ]

    operations = [
        migrations.RunPython(forwards, migrations.RunPython.noop, elidable=True),
    ]
