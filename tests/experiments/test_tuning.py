"""Tuning sets: validation with units, inheritance, revisions, diff, .conf import/export."""

from __future__ import annotations

import pytest
from django.urls import reverse

from experiments.models import TuningSet
from experiments.shared.tuning_keys import TuningValueError, normalise, parse_conf
from experiments.views.tuning import diff_rows


def test_it_converts_sizes_to_bytes():
    assert normalise("striping", "chunksize", "512k") == (524288, True)
    assert normalise("storage", "tuneFileReadAheadSize", "32m") == (32 * 1024**2, True)
    assert normalise("client", "tuneRemoteFSync", "True") == (True, True)
    assert normalise("os", "scheduler", "deadline") == ("deadline", True)


def test_it_marks_unknown_keys_and_keeps_them():
    assert normalise("storage", "tuneSomethingNew", "7") == ("7", False)


@pytest.mark.parametrize(
    "scope,key,value",
    [
        ("storage", "tuneNumWorkers", "many"),
        ("storage", "tuneNumWorkers", "0"),
        ("striping", "chunksize", "1x"),
        ("os", "scheduler", "fastest"),
        ("client", "tuneRemoteFSync", "maybe"),
    ],
)
def test_it_rejects_bad_values_of_known_keys(scope, key, value):
    with pytest.raises(TuningValueError, match=key):
        normalise(scope, key, value)


def test_it_parses_beegfs_conf_with_comments():
    text = "# storage\ntuneNumWorkers = 48\n\nconnInterfacesList=ib0,enP1 # fast first\r\n"
    assert parse_conf(text) == [(2, "tuneNumWorkers", "48"), (4, "connInterfacesList", "ib0,enP1")]
    with pytest.raises(TuningValueError, match="line 2"):
        parse_conf("a = 1\nnot a key value line\n")


@pytest.mark.django_db
def test_child_inherits_and_overrides(tuning_set, alice):
    child = TuningSet.objects.create(owner=alice, name="more workers", parent=tuning_set)
    child.replace_params([("storage", "tuneNumWorkers", "96")])
    effective = child.effective_params()
    assert effective[("storage", "tuneNumWorkers")][0] == "96"
    assert effective[("striping", "chunksize")] == ("512k", tuning_set)
    child.refresh_from_db()
    assert child.effective == {"storage.tuneNumWorkers": "96", "striping.chunksize": "512k"}
    # A change in the parent reaches the child's effective values.
    tuning_set.replace_params([("striping", "chunksize", "1m")])
    child.refresh_from_db()
    assert child.effective["striping.chunksize"] == "1m"
    assert tuning_set.revisions.count() == 2


@pytest.mark.django_db
def test_diff_names_changed_and_missing_keys(tuning_set, alice):
    other = TuningSet.objects.create(owner=alice, name="other")
    other.replace_params(
        [
            ("storage", "tuneNumWorkers", "48"),
            ("striping", "chunksize", "1m"),
            ("os", "vm.dirty_ratio", "20"),
        ]
    )
    rows = {(r["scope"], r["key"]): r["state"] for r in diff_rows(tuning_set, other)}
    assert rows == {
        ("storage", "tuneNumWorkers"): "same",
        ("striping", "chunksize"): "changed",
        ("os", "vm.dirty_ratio"): "only_b",
    }


@pytest.mark.django_db
def test_512k_and_524288_are_the_same_value(tuning_set, alice):
    other = TuningSet.objects.create(owner=alice, name="bytes")
    other.replace_params([("storage", "tuneNumWorkers", "48"), ("striping", "chunksize", "524288")])
    assert all(r["state"] == "same" for r in diff_rows(tuning_set, other))


@pytest.mark.django_db
def test_edit_form_reports_errors_inline_with_line_numbers(alice_client, tuning_set):
    url = reverse("experiments:tuningset_edit", args=[tuning_set.uuid])
    response = alice_client.post(
        url,
        {"name": "base", "scope_storage": "tuneNumWorkers = 4\ntuneFileReadSize = lots"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    assert b"line 2: tuneFileReadSize: expected a size" in response.content
    tuning_set.refresh_from_db()
    assert tuning_set.revision == 1


@pytest.mark.django_db
def test_a_set_cannot_inherit_from_its_child(alice_client, tuning_set, alice):
    child = TuningSet.objects.create(owner=alice, name="child", parent=tuning_set)
    url = reverse("experiments:tuningset_edit", args=[tuning_set.uuid])
    response = alice_client.post(url, {"name": "base", "parent": child.pk})
    assert response.status_code == 200
    assert b"Select a valid choice" in response.content


@pytest.mark.django_db
def test_export_and_import_round_trip(alice_client, tuning_set, alice):
    export = alice_client.get(
        reverse("experiments:tuningset_export", args=[tuning_set.uuid, "storage"])
    )
    assert export.status_code == 200
    assert "tuneNumWorkers = 48" in export.content.decode()
    target = TuningSet.objects.create(owner=alice, name="copy")
    response = alice_client.post(
        reverse("experiments:tuningset_import", args=[target.uuid]),
        {"scope": "storage", "text": export.content.decode()},
    )
    assert response.status_code == 302
    assert target.params.get(scope="storage", key="tuneNumWorkers").normalized == 48


@pytest.mark.django_db
def test_import_rejects_a_bad_value_with_its_line(alice_client, tuning_set):
    response = alice_client.post(
        reverse("experiments:tuningset_import", args=[tuning_set.uuid]),
        {"scope": "meta", "text": "# meta\ntuneTargetChooser = sometimes\n"},
    )
    assert response.status_code == 200
    assert b"line 2: tuneTargetChooser must be one of" in response.content


@pytest.mark.django_db
def test_diff_page_shows_both_sets(alice_client, tuning_set, alice):
    other = TuningSet.objects.create(owner=alice, name="other")
    other.replace_params([("striping", "chunksize", "1m")])
    response = alice_client.get(
        reverse("experiments:tuningset_diff"), {"a": tuning_set.uuid, "b": other.uuid}
    )
    html = response.content.decode()
    assert "2 keys differ" in html
    assert "only in A" in html
