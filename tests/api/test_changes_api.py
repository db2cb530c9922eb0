"""GET /api/changes/ and POST /api/changes/<id>/state/ (docs/design-notes.md, "Change
points")."""

from __future__ import annotations

import pytest

from experiments.changes import scan
from experiments.models import ChangePoint, Matrix, Testbed
from tests.helpers.changes import make_history, node_config, noisy

pytestmark = pytest.mark.django_db


@pytest.fixture
def found(testbed, alice):
    matrix = Matrix.objects.create(owner=alice, name="nightly", tool="fio")
    values = noisy(11, (2.0e9, 20), (1.4e9, 12))
    configs = [node_config()] * 20 + [node_config("6.8.0-31-generic")] * 12
    runs = make_history(testbed, alice, values, configs, matrix=matrix)
    other = Testbed.objects.create(owner=alice, name="other")
    make_history(other, alice, noisy(14, (1.0e9, 15), (2.0e9, 15)), [node_config()] * 30,
                 metric="read_bw")  # fmt: skip
    scan.analyse_pending()
    assert ChangePoint.objects.count() == 2
    return runs, matrix, other


def test_it_lists_change_points_with_the_documented_fields(api, found):
    runs, matrix, _ = found
    answer = api.get("/api/changes/", {"metric": "write_bw"})
    assert answer.status_code == 200
    (cp,) = answer.json()["results"]
    assert cp["metric"] == "write_bw" and cp["unit"] == "B/s"
    assert cp["run"] == str(runs[20].uuid) and cp["previous_run"] == str(runs[19].uuid)
    runs[0].refresh_from_db()
    assert cp["configuration"]["key"] == runs[0].config_key
    assert cp["configuration"]["text"].startswith("fio bs=1m")
    assert cp["configuration"]["matrix"] == str(matrix.uuid)
    assert cp["before"]["n"] == 20 and cp["after"]["n"] == 12
    low, high = cp["before"]["interval"]
    assert low < cp["before"]["mean"] < high
    assert 0 < cp["p_value"] <= 0.01
    assert cp["state"] == "new" and cp["announced_at"] is None
    (kernel,) = [i for i in cp["differences"]["items"] if i["what"] == "stor1: kernel"]
    assert kernel["after"] == "6.8.0-31-generic"
    assert cp == ChangePoint.objects.get(uuid=cp["id"]).as_api()


def test_filters(api, found, testbed):
    runs, matrix, other = found

    def ids(**query):
        answer = api.get("/api/changes/", query)
        assert answer.status_code == 200, answer.content
        return [c["metric"] for c in answer.json()["results"]]

    assert sorted(ids()) == ["read_bw", "write_bw"]
    assert ids(testbed=str(testbed.uuid)) == ["write_bw"]
    assert ids(testbed=str(other.uuid)) == ["read_bw"]
    assert ids(matrix=str(matrix.uuid)) == ["write_bw"]
    assert ids(metric="read_bw") == ["read_bw"]
    assert ids(state="muted") == []
    runs[0].refresh_from_db()
    assert ids(configuration=runs[0].config_key) == ["write_bw"]
    assert ids(run=str(runs[20].uuid)) == ["write_bw"]
    assert api.get("/api/changes/", {"state": "gone"}).status_code == 400
    assert api.get("/api/changes/", {"testbed": "nope"}).status_code == 400


def test_the_owner_marks_a_change_expected_with_a_note(api, found, alice):
    cp = ChangePoint.objects.get(metric="write_bw")
    answer = api.post(
        f"/api/changes/{cp.uuid}/state/",
        {"state": "expected", "note": "kernel 6.8 rollout"},
        format="json",
    )
    assert answer.status_code == 200, answer.content
    assert answer.json()["state"] == "expected"
    assert answer.json()["state_note"] == "kernel 6.8 rollout"
    cp.refresh_from_db()
    assert (cp.state, cp.state_by, cp.state_note) == ("expected", alice, "kernel 6.8 rollout")
    assert cp.state_at is not None
    assert [c["state"] for c in api.get("/api/changes/?state=expected").json()["results"]] == [
        "expected"
    ]


@pytest.mark.parametrize(
    "body",
    [{"state": "gone"}, {}, {"state": "muted", "note": "x" * 2001}, {"state": ["muted"]}],
)
def test_a_bad_state_is_a_400_and_changes_nothing(api, found, body):
    cp = ChangePoint.objects.get(metric="write_bw")
    answer = api.post(f"/api/changes/{cp.uuid}/state/", body, format="json")
    assert answer.status_code == 400
    cp.refresh_from_db()
    assert cp.state == "new" and cp.state_at is None


def test_an_unknown_change_point_is_a_404(api, found):
    answer = api.post(
        "/api/changes/00000000-0000-0000-0000-000000000000/state/", {"state": "muted"},
        format="json",
    )  # fmt: skip
    assert answer.status_code == 404


def test_the_list_costs_the_same_queries_whatever_its_length(
    api, found, django_assert_max_num_queries
):
    with django_assert_max_num_queries(8):
        answer = api.get("/api/changes/")
    assert len(answer.json()["results"]) == 2


def test_a_history_pushed_at_once_with_its_own_start_times_is_analysed_as_it_ran(api, testbed):
    """An old history sent in one bulk request, newest first (as an import of old output
    may): the change point is at the first run that started after the change."""
    from datetime import UTC, datetime, timedelta

    values = noisy(21, (3.0e9, 16), (2.0e9, 16))
    start = datetime(2025, 3, 1, tzinfo=UTC)
    items = [
        {
            "testbed": str(testbed.uuid),
            "tool": "fio",
            "params": {"rw": "write", "bs": "1m"},
            "started_at": (start + timedelta(days=i)).isoformat(),
            "metrics": [{"name": "write_bw", "value": values[i], "unit": "B/s"}],
            "key": f"old-{i}",
        }
        for i in reversed(range(32))
    ]
    answer = api.post("/api/runs/bulk/", items, format="json")
    assert answer.status_code == 200 and answer.json()["created"] == 32, answer.content
    # Results in the items' order: the i-th run of the history is the (31 - i)-th item.
    by_key = {f"old-{31 - j}": r["uuid"] for j, r in enumerate(answer.json()["results"])}
    scan.analyse_pending()
    (cp,) = api.get("/api/changes/").json()["results"]
    assert cp["run"] == by_key["old-16"] and cp["previous_run"] == by_key["old-15"]
    assert cp["at"].startswith("2025-03-17")
