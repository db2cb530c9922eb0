"""An imported output holding several independent measurements becomes one run per
measurement (issue 25, finding 2): fio jobs in different stonewall groups, several IOR runs
in one log, the steps of an elbencho sweep. Each run keeps the whole raw output and the
index of its part, so a reparse derives the same part; the preview says what will be stored;
an executed run whose output holds several parts is refused with a clear message.

Numbers were read from the sample files themselves (the fio JSON's io_bytes and runtime of
each job, IOR's summary rows)."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.urls import reverse

from experiments.models import Metric, Run
from experiments.results.importing import import_output
from experiments.results.store import parse_options, parse_stored, record_launch, reparse
from tests.helpers.samples import SAMPLES

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not SAMPLES.is_dir(), reason=f"no samples at {SAMPLES}"),
]
KIB, MIB = 1024, 1024**2
STONEWALL = SAMPLES / "fio" / "fio-3.28-json-15jobs-stonewall-seqwrite-direct-beegfs-thesis.json"
# (jobname, bs in bytes, write io_bytes, write runtime ms) of the file's 15 "jobs" entries.
JOBS = [
    ("bs_1k", KIB, 137252864, 16001),
    ("bs_2k", 2 * KIB, 270571520, 16001),
    ("bs_4k", 4 * KIB, 508612608, 16001),
    ("bs_8k", 8 * KIB, 917684224, 16001),
    ("bs_16k", 16 * KIB, 1388904448, 16001),
    ("bs_32k", 32 * KIB, 2113011712, 16001),
    ("bs_64k", 64 * KIB, 2835283968, 16001),
    ("bs_128k", 128 * KIB, 3553624064, 16001),
    ("bs_256k", 256 * KIB, 4657774592, 16001),
    ("bs_512k", 512 * KIB, 5636096000, 16001),
    ("bs_1M", MIB, 11466178560, 16001),
    ("bs_2M", 2 * MIB, 11708399616, 16002),
    ("bs_4M", 4 * MIB, 11618222080, 16003),
    ("bs_8M", 8 * MIB, 11601444864, 16005),
    ("bs_16M", 16 * MIB, 11727273984, 16003),
]
IOR_LOG = SAMPLES / "ior" / "ior-3.3.0dev-akrr-wrapped-multi-api-log.txt"


def _check_fifteen(runs, text: str) -> None:
    assert len(runs) == 15
    for index, (run, (name, bs, io_bytes, runtime_ms)) in enumerate(zip(runs, JOBS, strict=True)):
        assert run.raw_output == text  # every run keeps the output it came from
        assert not run.parse_error and run.tool == "fio"
        assert run.params["transfer_size"] == bs
        assert run.launch["parse_options"]["part"] == index
        assert run.launch["part"]["label"] == name and run.launch["part"]["count"] == 15
        assert name in run.label
        headline = Metric.objects.get(run=run, name="write_bw", primary=True)
        assert headline.value == pytest.approx(io_bytes * 1000 / runtime_ms)


def _runs_in_part_order():
    return sorted(Run.objects.all(), key=lambda r: r.launch["parse_options"]["part"])


def test_import_of_stonewalled_fio_jobs_stores_one_run_per_job(testbed, tuning_set):
    text = STONEWALL.read_text()
    first = import_output(text, testbed=testbed, tuning_set=tuning_set, label="write_seq_ib.json")
    assert Run.objects.count() == 15
    runs = _runs_in_part_order()
    assert runs[0].pk == first.pk
    _check_fifteen(runs, text)
    assert {r.tuning_set_id for r in runs} == {tuning_set.pk}
    # Comparisons read the headline rows: 15 of them, the peak the 16M job's 732817220 B/s.
    headlines = Metric.objects.filter(name="write_bw", primary=True)
    assert headlines.count() == 15
    peak = max(headlines, key=lambda m: m.value)
    assert peak.value == pytest.approx(11727273984 / 16.003)
    assert peak.run.params["transfer_size"] == 16 * MIB


def test_reparse_of_a_part_derives_that_part_again(testbed):
    import_output(STONEWALL.read_text(), testbed=testbed)
    run = _runs_in_part_order()[12]  # bs_4M
    Metric.objects.filter(run=run).delete()
    run.params = {}
    run.save(update_fields=["params"])
    assert reparse(run) is None
    run.refresh_from_db()
    assert run.params["transfer_size"] == 4 * MIB
    assert Metric.objects.get(run=run, name="write_bw", primary=True).value == pytest.approx(
        11618222080 / 16.003
    )
    assert Run.objects.count() == 15  # a part's reparse creates nothing


def test_reparse_splits_a_multi_part_run_imported_as_one(testbed):
    """A run imported before the split (its whole file one run) becomes one run per job."""
    text = STONEWALL.read_text()
    old = Run.objects.create(
        testbed=testbed,
        owner=testbed.owner,
        tool="fio",
        status=Run.Status.IMPORTED,
        raw_output=text,
        label="old",
        launch=record_launch({}, {}, parse_options()),
    )
    assert reparse(old) is None
    _check_fifteen(_runs_in_part_order(), text)
    assert _runs_in_part_order()[0].pk == old.pk


def test_one_measurement_stays_one_run(testbed):
    text = (SAMPLES / "ior" / "ior-3.2.1-posix-fpp-64tasks-wr-beegfs-aws.txt").read_text()
    run = import_output(text, testbed=testbed)
    assert Run.objects.count() == 1
    assert "part" not in run.launch and "part" not in run.launch["parse_options"]


def test_import_preview_says_how_many_runs_the_file_makes(alice_client, testbed):
    text = STONEWALL.read_text()
    form = {"testbed": testbed.uuid, "text": text, "action": "preview"}
    response = alice_client.post(reverse("experiments:run_import"), form)
    html = response.content.decode()
    assert response.status_code == 200
    assert "This file holds 15 independent jobs: 15 runs will be stored (bs 1k … 16M)." in html
    assert "Save 15 runs" in html
    # One row per run to be stored, with its own transfer size and headline.
    assert html.count('class="part-row"') == 15
    assert not Run.objects.exists()

    save = {
        "action": "save",
        "testbed": testbed.uuid,
        "item_name": "write_seq_ib.json",
        "item_text": text,
    }
    response = alice_client.post(reverse("experiments:run_import"), save)
    assert response.status_code == 302 and response.url == reverse("experiments:run_list")
    _check_fifteen(_runs_in_part_order(), text)


def test_import_preview_of_one_measurement_says_nothing_about_parts(alice_client, testbed):
    text = (SAMPLES / "ior" / "ior-3.2.1-posix-fpp-64tasks-wr-beegfs-aws.txt").read_text()
    form = {"testbed": testbed.uuid, "text": text, "action": "preview"}
    html = alice_client.post(reverse("experiments:run_import"), form).content.decode()
    assert "runs will be stored" not in html and "Save 1 run<" in html


def test_import_results_command_stores_the_ten_ior_runs_of_a_log(testbed, capsys):
    call_command("import_results", str(IOR_LOG), "--testbed", testbed.name)
    assert Run.objects.filter(tool="ior").count() == 10
    out = capsys.readouterr().out
    assert "10 independent runs" in out
    runs = _runs_in_part_order()
    # "-a POSIX" then "-a POSIX -F": summary rows "write 426.77 …" and "write 571.46 …"
    assert runs[0].params["file_per_process"] is False
    assert runs[1].params["file_per_process"] is True
    assert Metric.objects.get(run=runs[0], name="write_bw", stat="max").value == pytest.approx(
        426.77 * MIB
    )
    assert Metric.objects.get(run=runs[1], name="write_bw", stat="max").value == pytest.approx(
        571.46 * MIB
    )


def test_an_executed_run_with_several_parts_is_refused(testbed):
    """The adapters never write such output (one fio job group, one IOR test, one mdtest
    run per invocation); a run of a matrix cell measures one thing, so output of several
    measurements fails with a message saying why, its raw output kept."""
    text = STONEWALL.read_text()
    run = Run.objects.create(
        testbed=testbed,
        owner=testbed.owner,
        tool="fio",
        status=Run.Status.RUNNING,
        raw_output=text,
        launch=record_launch({}, {"bs": "4k"}, {}),
    )

    def outcome(parsed):
        if parsed.parse_error:
            return {"status": Run.Status.FAILED, "error": parsed.parse_error}
        return {"status": Run.Status.SUCCEEDED, "error": ""}

    error = parse_stored(run, outcome=outcome)
    assert error and "15 independent jobs" in error and "one run measures one" in error
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and run.raw_output == text
    assert Run.objects.count() == 1 and not Metric.objects.exists()


ELBENCHO_SWEEP = SAMPLES / "elbencho" / "elbencho-1.x-ms-format-sweep-large-files-write.txt"
# (data set of "Working on …/sweep/<set> with 56 threads...", file size, WRITE "Throughput
# MiB/s" LAST DONE) of the sweep's 11 steps, read from the file.
SWEEP_STEPS = [
    ("1024x1GiB", 1, 10488),
    ("512x2GiB", 2, 10456),
    ("256x4GiB", 4, 9285),
    ("128x8GiB", 8, 9740),
    ("64x16GiB", 16, 9303),
    ("32x32GiB", 32, 9484),
    ("16x64GiB", 64, 9646),
    ("8x128GiB", 128, 9421),
    ("4x256GiB", 256, 9478),
    ("2x512GiB", 512, 9649),
    ("1x1024GiB", 1024, 9443),
]


def test_import_of_an_elbencho_sweep_stores_one_run_per_step(testbed):
    text = ELBENCHO_SWEEP.read_text()
    import_output(text, testbed=testbed, label="sweep.txt")
    assert Run.objects.filter(tool="elbencho").count() == 11
    runs = _runs_in_part_order()
    for index, (run, (dataset, gib, mib_s)) in enumerate(zip(runs, SWEEP_STEPS, strict=True)):
        assert run.raw_output == text and not run.parse_error
        assert run.launch["parse_options"]["part"] == index
        assert run.launch["part"]["label"] == dataset and run.launch["part"]["count"] == 11
        assert dataset in run.label
        assert run.params["file_size"] == gib * 1024**3
        assert run.params["threads"] == 56
        values = Metric.objects.filter(run=run, name="write_bw", stat="value")
        assert [m.value for m in values] == [mib_s * MIB]
