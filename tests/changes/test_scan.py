"""Change points found over stored runs and explained by what the runs recorded."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.core.management import call_command

from experiments.changes import scan
from experiments.models import (
    ChangePoint,
    ChangeScan,
    ConfigSummary,
    Run,
    TuningRevision,
    TuningSet,
)
from experiments.results.store import replace_metrics
from tests.helpers.changes import make_history, node_config, noisy

pytestmark = pytest.mark.django_db


def item(cp: ChangePoint, what: str) -> dict:
    (found,) = [i for i in cp.differences["items"] if i["what"] == what]
    return found


def test_it_finds_the_change_at_the_first_run_on_the_new_kernel(history):
    result = scan.analyse_pending()
    assert result == {"analysed": 1, "changes": 1}
    (cp,) = ChangePoint.objects.all()
    assert cp.run == history[20] and cp.previous_run == history[19]
    assert cp.metric == "write_bw" and cp.unit == "B/s" and cp.state == "new"
    assert (cp.before_n, cp.after_n) == (20, 12)
    assert cp.before_mean == pytest.approx(2.0e9, rel=0.03)
    assert cp.after_mean == pytest.approx(1.4e9, rel=0.03)
    assert cp.before_low < cp.before_mean < cp.before_high
    assert cp.p_value <= 0.01 and "e-divisive" in cp.method
    assert cp.shift == pytest.approx(-0.3, abs=0.03)
    assert item(cp, "stor1: kernel") == {
        "area": "node", "what": "stor1: kernel", "before": "6.1.0-18-amd64",
        "after": "6.8.0-31-generic",
    }  # fmt: skip
    assert item(cp, "stor1: I/O scheduler")["after"] == "none"
    whats = {i["what"] for i in cp.differences["items"]}
    assert "stor1: sysctl vm.dirty_ratio" not in whats  # the same on both sides
    assert not any("run_dir" in w for w in whats)
    assert cp.differences["nothing_changed"] is False
    assert "kernel" in cp.differences["summary"]
    assert cp.differences["verdicts"] == {"before": {"disk": 20}, "after": {"network": 12}}
    assert cp.configuration.startswith("fio bs=1m, numjobs=4, rw=write, on bench")
    assert cp.testbed == history[0].testbed
    # Watermark: nothing pending until a run lands.
    assert ChangeScan.objects.get(metric="write_bw").n == 32
    assert scan.analyse_pending() == {"analysed": 0, "changes": 0}


def test_a_rescan_and_a_new_run_keep_one_change_and_its_state(history, alice):
    scan.analyse_pending()
    cp = ChangePoint.objects.get()
    ChangePoint.objects.filter(pk=cp.pk).update(state="acknowledged")
    call_command("detect_changes")
    config = node_config("6.8.0-31-generic", "none")
    more = make_history(
        history[0].testbed, alice, noisy(12, (1.4e9, 3)), [config] * 3,
        start=history[-1].started_at,
    )  # fmt: skip
    assert more
    scan.analyse_pending()
    (again,) = ChangePoint.objects.all()
    assert again.pk == cp.pk and again.state == "acknowledged" and again.after_n == 15


def test_pure_noise_history_has_no_change(testbed, alice):
    make_history(testbed, alice, noisy(5, (2.0e9, 40)), [node_config()] * 40)
    assert scan.analyse_pending() == {"analysed": 1, "changes": 0}
    assert not ChangePoint.objects.exists()


def test_nothing_recorded_changed_is_said(testbed, alice):
    make_history(testbed, alice, noisy(6, (2.0e9, 15), (1.2e9, 15)), [node_config()] * 30)
    scan.analyse_pending()
    (cp,) = ChangePoint.objects.all()
    assert cp.differences["items"] == [] and cp.differences["nothing_changed"] is True
    assert cp.differences["summary"] == "nothing recorded changed"


def test_an_edited_tuning_set_and_a_new_tool_version_are_named(testbed, alice):
    tuned = TuningSet.objects.create(owner=alice, name="tuned")
    tuned.replace_params([("os", "vm.dirty_ratio", "20")])
    first = make_history(testbed, alice, noisy(7, (2.0e9, 12)), [node_config()] * 12,
                         tuning_set=tuned)  # fmt: skip
    tuned.replace_params([("os", "vm.dirty_ratio", "5")])
    # Each revision dates from before the runs it applied to.
    TuningRevision.objects.filter(tuning_set=tuned, number=1).update(
        created=first[0].started_at - timedelta(hours=1)
    )
    TuningRevision.objects.filter(tuning_set=tuned, number=2).update(
        created=first[-1].started_at + timedelta(minutes=30)
    )
    make_history(
        testbed, alice, noisy(18, (1.0e9, 12)), [node_config(**{"vm.dirty_ratio": "5"})] * 12,
        tuning_set=tuned, start=first[-1].started_at + (first[1].started_at - first[0].started_at),
        tool_versions=dict.fromkeys(range(12), "fio-3.36"),
    )  # fmt: skip
    scan.analyse_pending()
    (cp,) = ChangePoint.objects.all()
    assert item(cp, "tuning set revision") == {
        "area": "tuning", "what": "tuning set revision", "before": "r1", "after": "r2"
    }  # fmt: skip
    assert item(cp, "os.vm.dirty_ratio")["after"] == "5"
    assert item(cp, "stor1: sysctl vm.dirty_ratio")["before"] == "20"
    assert item(cp, "tool version") == {
        "area": "run", "what": "tool version", "before": "fio-3.33", "after": "fio-3.36"
    }  # fmt: skip


def test_an_imported_history_is_analysed_in_the_order_it_ran(testbed, alice):
    """An old history imported at once, newest first: the change is at the run that started
    first after it, not at the run stored first."""
    values = noisy(9, (2.0e9, 18), (1.3e9, 18))
    runs = make_history(testbed, alice, values, [node_config()] * 36, order=range(35, -1, -1))
    assert runs[0].pk > runs[35].pk
    scan.analyse_pending()
    (cp,) = ChangePoint.objects.all()
    assert cp.run == runs[18] and cp.previous_run == runs[17]


def test_a_long_history_imported_at_once_is_analysed_in_windows(testbed, alice, settings):
    settings.CHANGES_WINDOW = 40
    values = noisy(10, (2.0e9, 30), (1.5e9, 30), (2.2e9, 40))
    runs = make_history(testbed, alice, values, [node_config()] * 100)
    scan.analyse_pending()
    assert [cp.run for cp in ChangePoint.objects.order_by("at")] == [runs[30], runs[60]]


def _muted_like(cp: ChangePoint, run: Run, **changes) -> ChangePoint:
    """A change point the lab muted, like ``cp`` but at ``run`` (a rescan of another window
    found it there)."""
    fields = {f.attname: getattr(cp, f.attname) for f in ChangePoint._meta.concrete_fields}
    for name in ("id", "uuid"):
        fields.pop(name)
    fields.update(run_id=run.pk, state="muted", state_note="new kernel, known", **changes)
    return ChangePoint.objects.create(**fields)


def test_a_known_change_is_not_new_again(history):
    """The lab muted a change like this one a few runs away: found, it is stored muted
    (``known``), never as new."""
    scan.analyse_pending()
    cp = ChangePoint.objects.get()
    muted = _muted_like(cp, history[27])
    cp.delete()
    scan.rescan()
    again = ChangePoint.objects.get(run=history[20])
    assert again.state == "muted" and again.known == muted
    assert "known" in again.state_note
    assert not ChangePoint.objects.filter(state="new").exists()


def test_a_muted_change_found_again_keeps_its_state(history):
    scan.analyse_pending()
    ChangePoint.objects.update(state="muted")
    scan.rescan()
    (cp,) = ChangePoint.objects.all()
    assert cp.state == "muted"


def test_a_change_of_the_other_sign_is_new(history):
    scan.analyse_pending()
    cp = ChangePoint.objects.get()
    _muted_like(cp, history[27], before_mean=cp.after_mean, after_mean=cp.before_mean)
    cp.delete()
    scan.rescan()
    assert ChangePoint.objects.get(run=history[20]).state == "new"


def test_a_known_shift_at_another_place_is_new(history, alice):
    scan.analyse_pending()
    ChangePoint.objects.update(state="muted")
    # The throughput falls again, much further, 12 runs later: a new change.
    more = make_history(
        history[0].testbed, alice, noisy(13, (0.5e9, 12)), [node_config("6.9.0", "none")] * 12,
        start=history[-1].started_at,
    )  # fmt: skip
    scan.analyse_pending()
    new = ChangePoint.objects.get(state="new")
    assert new.run == more[0]


def test_published_configurations_are_not_analysed(testbed):
    run = Run.objects.create(testbed=testbed, tool="fio", status="published", published=True,
                             source="A study", params={"bs": "1m"})  # fmt: skip
    replace_metrics(run, [{"name": "write_bw", "value": 1e9, "unit": "B/s"}])
    assert ConfigSummary.objects.exists()
    assert scan.pending() == []


def test_the_task_runs_a_sweep(history):
    from experiments.changes.tasks import detect

    assert detect.apply().get() == {"analysed": 1, "changes": 1, "announced": 1}


def test_the_alerts_find_new_unannounced_changes_and_claim_each_once(history):
    from django.utils import timezone

    scan.analyse_pending()
    cp = ChangePoint.objects.get()
    assert list(ChangePoint.objects.to_announce()) == [cp]
    now = timezone.now()
    assert ChangePoint.objects.claim_announcement(cp.pk, now) is True
    assert ChangePoint.objects.claim_announcement(cp.pk, now) is False
    assert list(ChangePoint.objects.to_announce()) == []
    ChangePoint.objects.filter(pk=cp.pk).update(announced_at=None, state="acknowledged")
    assert list(ChangePoint.objects.to_announce()) == []


def test_a_new_change_is_announced_once_with_what_changed(history, testbed):
    from experiments.changes.announce import announce_pending
    from experiments.models import Alert

    scan.analyse_pending()
    cp = ChangePoint.objects.get()
    assert announce_pending() == 1
    alert = Alert.objects.get()
    assert alert.key == f"change:{cp.uuid}" and alert.kind == "change_point"
    assert alert.testbed == testbed
    cp.refresh_from_db()
    assert cp.announced_at is not None
    assert alert.data == cp.as_api() | {"announced_at": None}
    assert alert.subject == f"write_bw {cp.shift:+.0%}: {cp.configuration}"
    assert alert.subject.startswith("write_bw -") and "on bench" in alert.subject
    assert "kernel" in alert.text and "6.8.0-31-generic" in alert.text, alert.text
    assert re.search(r"^Before: [0-9.e+]+ B/s \(n = 20, 95% interval ", alert.text, re.M)
    assert re.search(r"^After: [0-9.e+]+ B/s \(n = 12, 95% interval ", alert.text, re.M)
    # Announced once: a second sweep sends nothing, nor does a change acknowledged first.
    assert announce_pending() == 0
    ChangePoint.objects.filter(pk=cp.pk).update(announced_at=None, state="acknowledged")
    assert announce_pending() == 0
    assert Alert.objects.count() == 1
