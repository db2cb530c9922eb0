"""Importing existing output: browser preview and save, bulk command, reparse, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from experiments.models import Metric, Run
from experiments.results.importing import import_output
from experiments.results.store import reparse
from tests.helpers.samples import SAMPLES

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not SAMPLES.is_dir(), reason=f"no samples at {SAMPLES}"),
]
IOR = SAMPLES / "ior" / "ior-3.2.1-posix-fpp-64tasks-wr-beegfs-aws.txt"
MDTEST = SAMPLES / "mdtest" / "mdtest-3.3.0-64tasks-8nodes-3iter-lustre-gcp.txt"
# fio runs generated for the parser tests (tests/parsers/fixtures/fio/README.md)
FIO_FIXTURES = Path(__file__).resolve().parents[1] / "parsers" / "fixtures" / "fio"


def test_browser_import_previews_then_saves(alice_client, testbed, tuning_set):
    text = IOR.read_text()
    form = {
        "testbed": testbed.uuid,
        "tuning_set": tuning_set.uuid,
        "tool": "",
        "op": "",
        "label": "",
        "text": text,
        "action": "preview",
    }
    response = alice_client.post(reverse("experiments:run_import"), form)
    html = response.content.decode()
    assert response.status_code == 200
    assert "write_bw" in html and "threads=64" in html
    assert not Run.objects.exists()  # a preview saves nothing

    save = {
        "action": "save",
        "testbed": testbed.uuid,
        "tuning_set": tuning_set.uuid,
        "tool": "",
        "op": "",
        "label": "",
        "item_name": "aws run",
        "item_text": text,
    }
    response = alice_client.post(reverse("experiments:run_import"), save)
    run = Run.objects.get()
    assert response.url == run.get_absolute_url()
    assert (run.tool, run.tool_version, run.params["threads"]) == ("ior", "3.2.1", 64)
    page = alice_client.get(run.get_absolute_url()).content.decode()
    # Raw text on the run page: the file's own "Max Write: 114.47 MiB/sec (120.03 MB/sec)".
    assert "Max Write: 114.47 MiB/sec (120.03 MB/sec)" in page
    assert Metric.objects.get(run=run, name="write_bw", stat="max").value == pytest.approx(
        114.47 * 2**20
    )
    compare = alice_client.get(
        reverse("experiments:compare"),
        {"metric": "write_bw", "x": "param:threads", "series": "tool"},
    )
    assert "ior" in compare.content.decode()


def test_unparseable_input_is_stored_with_its_error(alice_client, testbed):
    save = {
        "action": "save",
        "testbed": testbed.uuid,
        "item_name": "junk",
        "item_text": "hello, this is not a benchmark",
    }
    alice_client.post(reverse("experiments:run_import"), save)
    run = Run.objects.get()
    assert run.raw_output == "hello, this is not a benchmark"
    assert "could not recognise" in run.parse_error
    assert "could not recognise" in alice_client.get(run.get_absolute_url()).content.decode()


def test_topology_output_is_refused_in_run_import(alice_client, testbed):
    text = (SAMPLES / "beegfs" / "listnodes-nodetype-storage.txt").read_text()
    response = alice_client.post(
        reverse("experiments:run_import"),
        {"testbed": testbed.uuid, "text": text, "action": "preview"},
    )
    assert "BeeGFS topology output" in response.content.decode()


def test_import_results_command_and_reparse(testbed, tuning_set, capsys):
    call_command(
        "import_results",
        str(IOR),
        str(MDTEST),
        "--testbed",
        testbed.name,
        "--tuning",
        str(tuning_set.uuid),
    )
    assert Run.objects.count() == 2
    mdtest = Run.objects.get(tool="mdtest")
    # mdtest 3.3.0 sample: "File creation : 22421.537 13454.293 19186.060 4063.924".
    assert mdtest.params["threads"] == 64
    assert mdtest.metrics.get(name="file_create", stat="max").value == 22421.537
    n_metrics = mdtest.metrics.count()
    mdtest.metrics.all().delete()
    call_command("reparse", "--tool", "mdtest")
    assert mdtest.metrics.count() == n_metrics


def test_import_results_names_a_missing_testbed():
    with pytest.raises(CommandError, match="no testbed named 'nope'"):
        call_command("import_results", str(IOR), "--testbed", "nope")


def test_import_results_fails_on_unparseable_files(testbed, tmp_path):
    junk = tmp_path / "junk.txt"
    junk.write_text("nothing to see")
    with pytest.raises(CommandError, match="1 of 1 files"):
        call_command("import_results", str(junk), "--testbed", testbed.name)
    assert Run.objects.get().raw_output == "nothing to see"


def test_imported_fio_group_reporting_result_keeps_its_threads(testbed, tuning_set):
    """numjobs=2 with group_reporting: one combined JSON entry stands for two processes, and
    the parsed threads reach the run's params (on import and on reparse)."""
    text = (FIO_FIXTURES / "fio-3.33-json-numjobs2-group-reporting.json").read_text()
    run = import_output(text, testbed=testbed, tuning_set=tuning_set)
    assert (run.tool, run.parse_error) == ("fio", "")
    assert run.params["threads"] == 2
    run.params = {}
    run.save(update_fields=["params"])
    assert reparse(run) is None
    run.refresh_from_db()
    assert run.params["threads"] == 2


def test_browser_import_carries_telemetry(alice_client, testbed):
    import json

    from django.core.files.uploadedfile import SimpleUploadedFile

    from experiments.models import RunTelemetry
    from tests.helpers.telemetry import node

    text = IOR.read_text()
    doc = node("storage02", **{"disk_util:sdb": [0.98] * 10})
    form = {"testbed": testbed.uuid, "text": text, "action": "preview"}
    upload = SimpleUploadedFile("t.json", json.dumps(doc).encode(), "application/json")
    html = alice_client.post(
        reverse("experiments:run_import"), {**form, "telemetry": upload}
    ).content.decode()
    assert 'name="telemetry_json"' in html and not Run.objects.exists()
    carried = json.loads(
        html.split('name="telemetry_json" value="')[1].split('"')[0].replace("&quot;", '"')
    )
    assert carried == [doc]
    save = {
        "action": "save",
        "testbed": testbed.uuid,
        "item_name": "aws run",
        "item_text": text,
        "telemetry_json": json.dumps([doc]),
    }
    alice_client.post(reverse("experiments:run_import"), save)
    run = Run.objects.get()
    assert RunTelemetry.objects.get(run=run).hostname == "storage02"
    assert run.bottleneck == "disk"

    # A bad document at either step: nothing is imported, and the page says why.
    doc["t"][2] = 0.5
    bad = SimpleUploadedFile("t.json", json.dumps(doc).encode(), "application/json")
    html = alice_client.post(
        reverse("experiments:run_import"), {**form, "telemetry": bad}
    ).content.decode()
    assert "t.json: telemetry[0].t[2]: times must increase" in html
    response = alice_client.post(
        reverse("experiments:run_import"),
        {**save, "telemetry_json": json.dumps([doc])},
        follow=True,
    )
    assert "Nothing was imported. telemetry: telemetry[0].t[2]" in response.content.decode()
    assert Run.objects.count() == 1
