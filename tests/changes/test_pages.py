"""The inbox, a change point's page and the history pages: alice operates the testbed, bob
is a colleague who may read but not change, an anonymous visitor sees nothing."""

from __future__ import annotations

import pytest
from django.urls import reverse

from experiments.changes import scan
from experiments.models import ChangePoint
from tests.helpers.changes import make_history

pytestmark = pytest.mark.django_db


@pytest.fixture
def cp(history) -> ChangePoint:
    scan.analyse_pending()
    return ChangePoint.objects.get()


def test_it_lists_new_changes_in_the_inbox(alice_client, cp):
    page = alice_client.get(reverse("experiments:change_list"))
    assert page.status_code == 200
    body = page.content.decode()
    assert f'id="change-{cp.uuid}"' in body
    assert "stor1: kernel: 6.1.0-18-amd64 → 6.8.0-31-generic" in body
    assert 'hx-post="' in body and "csrfmiddlewaretoken" in body
    assert (
        f'id="change-{cp.uuid}"' not in alice_client.get("/changes/?state=muted").content.decode()
    )


def test_the_operator_acknowledges_with_htmx(alice_client, alice, cp):
    answer = alice_client.post(
        reverse("experiments:change_state", args=[cp.uuid]),
        {"state": "acknowledged", "note": "looking into it"},
        HTTP_HX_REQUEST="true",
    )
    assert answer.status_code == 200
    assert 'class="change state-acknowledged"' in answer.content.decode()
    cp.refresh_from_db()
    assert (cp.state, cp.state_by, cp.state_note) == ("acknowledged", alice, "looking into it")


def test_a_plain_post_goes_back_and_a_bad_state_changes_nothing(alice_client, cp):
    url = reverse("experiments:change_state", args=[cp.uuid])
    answer = alice_client.post(url, {"state": "expected", "next": "/changes/?state=expected"})
    assert answer.status_code == 302 and answer.url == "/changes/?state=expected"
    answer = alice_client.post(url, {"state": "bogus"}, HTTP_HX_REQUEST="true")
    assert answer.status_code == 400
    cp.refresh_from_db()
    assert cp.state == "expected"


def test_a_colleague_reads_but_cannot_change(bob_client, cp):
    body = bob_client.get(reverse("experiments:change_list")).content.decode()
    assert f'id="change-{cp.uuid}"' in body and "hx-post" not in body
    answer = bob_client.post(
        reverse("experiments:change_state", args=[cp.uuid]), {"state": "muted"}
    )
    assert answer.status_code == 403
    cp.refresh_from_db()
    assert cp.state == "new"


def test_anonymous_visitors_are_sent_to_log_in(client, cp):
    for url in (
        reverse("experiments:change_list"),
        cp.get_absolute_url(),
        cp.history_url(),
        reverse("experiments:testbed_history", args=[cp.testbed.uuid]),
    ):
        answer = client.get(url)
        assert answer.status_code == 302 and "/login" in answer.url
    answer = client.post(reverse("experiments:change_state", args=[cp.uuid]), {"state": "muted"})
    assert answer.status_code in (302, 403)
    cp.refresh_from_db()
    assert cp.state == "new"


def test_the_change_page_names_the_differences(alice_client, cp):
    body = alice_client.get(cp.get_absolute_url()).content.decode()
    assert 'id="change-differences"' in body and "6.8.0-31-generic" in body
    assert "disk 20" in body and "network 12" in body


def test_the_configuration_history_draws_runs_and_change_points(alice_client, cp, history):
    page = alice_client.get(cp.history_url())
    assert page.status_code == 200
    figure = page.context["figure"]
    (trace,) = figure["data"]
    assert len(trace["y"]) == 32
    assert trace["customdata"][20] == str(history[20].uuid)
    (shape,) = figure["layout"]["shapes"]
    assert shape["x0"] == cp.at.isoformat()
    assert "history.js" in page.content.decode()
    assert alice_client.get("/history/not-a-key/").status_code == 404
    assert alice_client.get("/history/" + "0" * 32 + "/").status_code == 404


def test_the_testbed_history(alice_client, cp, testbed, alice):
    make_history(testbed, alice, [1e9] * 5, [{}] * 5, params={"rw": "read"}, metric="read_bw")
    page = alice_client.get(reverse("experiments:testbed_history", args=[testbed.uuid]))
    assert page.status_code == 200
    assert len(page.context["lines"]) == 2
    assert f'id="change-{cp.uuid}"' in page.content.decode()
    assert len(page.context["figure"]["layout"]["shapes"]) == 1


def test_pages_cost_few_queries(alice_client, cp, django_assert_max_num_queries):
    with django_assert_max_num_queries(12):
        alice_client.get(reverse("experiments:change_list"))
    with django_assert_max_num_queries(14):
        alice_client.get(cp.history_url())


def test_the_comparison_links_a_point_to_its_history(alice_client, cp, history):
    body = alice_client.get("/compare/?metric=write_bw").content.decode()
    history[0].refresh_from_db()
    assert f"/history/{history[0].config_key}/?metric=write_bw" in body
    assert "history of this point" in body


def test_the_testbed_history_draws_each_configurations_newest_runs(
    alice_client, cp, history, monkeypatch
):
    """The testbed's chart draws each configuration's newest TESTBED_POINTS runs and names
    how many it has in all (its summary's count), whatever its history's length."""
    from experiments.changes import history as history_module

    monkeypatch.setattr(history_module, "TESTBED_POINTS", 10)
    page = alice_client.get(reverse("experiments:testbed_history", args=[cp.testbed.uuid]))
    (ln,) = page.context["lines"]
    assert ln.total == 32
    assert [p.run_id for p in ln.points] == [r.pk for r in history[-10:]]
    (trace,) = page.context["figure"]["data"]
    assert trace["customdata"] == [str(r.uuid) for r in history[-10:]]
    assert "32 runs" in page.content.decode()
