"""Every page for its owner, another user and an anonymous visitor."""

from __future__ import annotations

import pytest
from django.urls import reverse

from experiments.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(profile, node, testbed, tuning_set, alice):
    run = Run.objects.create(
        owner=alice,
        testbed=testbed,
        tuning_set=tuning_set,
        tool="dd",
        status="imported",
        raw_output="1073741824 bytes copied",
    )
    return {"hardware": profile, "node": node, "testbed": testbed, "tuning": tuning_set, "run": run}


def read_urls(world) -> list[str]:
    return [
        reverse("experiments:dashboard"),
        reverse("experiments:run_list"),
        reverse("experiments:compare"),
        reverse("experiments:tuningset_list"),
        reverse("experiments:tuningset_diff"),
        reverse("experiments:hardware_list"),
        reverse("experiments:node_list"),
        reverse("experiments:testbed_list"),
        reverse("experiments:hardware", args=[world["hardware"].uuid]),
        reverse("experiments:node", args=[world["node"].uuid]),
        reverse("experiments:testbed", args=[world["testbed"].uuid]),
        reverse("experiments:tuningset", args=[world["tuning"].uuid]),
        reverse("experiments:run", args=[world["run"].uuid]),
        reverse("experiments:tuningset_export", args=[world["tuning"].uuid, "storage"]),
        reverse("experiments:hardware_new"),
        reverse("experiments:node_new"),
        reverse("experiments:testbed_new"),
        reverse("experiments:tuningset_new"),
    ]


def write_urls(world) -> list[str]:
    tb, hw = world["testbed"], world["hardware"]
    target = tb.targets.first()
    return [
        reverse("experiments:hardware_edit", args=[hw.uuid]),
        reverse("experiments:hardware_delete", args=[hw.uuid]),
        reverse("experiments:node_edit", args=[world["node"].uuid]),
        reverse("experiments:node_delete", args=[world["node"].uuid]),
        reverse("experiments:testbed_edit", args=[tb.uuid]),
        reverse("experiments:testbed_delete", args=[tb.uuid]),
        reverse("experiments:tuningset_edit", args=[world["tuning"].uuid]),
        reverse("experiments:tuningset_delete", args=[world["tuning"].uuid]),
        reverse("experiments:tuningset_import", args=[world["tuning"].uuid]),
        reverse("experiments:part_new", args=["hardware", hw.uuid, "drive"]),
        reverse("experiments:part_new", args=["testbeds", tb.uuid, "target"]),
        reverse("experiments:part_edit", args=["testbeds", tb.uuid, "target", target.uuid]),
    ]


def test_it_shows_every_page_to_the_owner(alice_client, world):
    for url in read_urls(world) + write_urls(world):
        assert alice_client.get(url).status_code == 200, url


def test_it_lets_another_user_read_but_not_change(bob_client, world):
    for url in read_urls(world):
        assert bob_client.get(url).status_code == 200, url
    for url in write_urls(world):
        assert bob_client.get(url).status_code == 403, url
        assert bob_client.post(url, {}).status_code == 403, url


def test_it_sends_anonymous_visitors_to_login(client, world):
    for url in read_urls(world) + write_urls(world):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response.url.startswith(reverse("login")), url


def test_it_refuses_part_delete_to_another_user(bob_client, world):
    tb = world["testbed"]
    target = tb.targets.first()
    url = reverse("experiments:part_delete", args=["testbeds", tb.uuid, "target", target.uuid])
    assert bob_client.post(url).status_code == 403
    assert tb.targets.filter(pk=target.pk).exists()


def test_published_data_is_read_only_even_for_staff(client, django_user_model, world):
    staff = django_user_model.objects.create_superuser("root", password="x")
    client.force_login(staff)
    hw = world["hardware"]
    hw.published = True
    hw.save()
    assert client.get(reverse("experiments:hardware_edit", args=[hw.uuid])).status_code == 403
    assert client.get(reverse("experiments:hardware", args=[hw.uuid])).status_code == 200


def test_unknown_uuid_is_404(alice_client):
    url = reverse("experiments:testbed", args=["00000000-0000-0000-0000-000000000000"])
    assert alice_client.get(url).status_code == 404


def test_admin_lists_every_model(client, django_user_model, world):
    staff = django_user_model.objects.create_superuser("root", password="x")
    client.force_login(staff)
    for model in [
        "hardwareprofile",
        "drive",
        "nic",
        "node",
        "testbed",
        "testbednode",
        "target",
        "storagepool",
        "tuningset",
        "tuningparameter",
        "tuningrevision",
        "run",
        "metric",
        "worker",
    ]:
        assert client.get(f"/admin/experiments/{model}/").status_code == 200, model


def test_node_requests_and_beegfs_config_changes_are_read_only_in_the_admin(
    client, django_user_model, world
):
    """The rows node agents write are listed and viewed in the admin, never changed there."""
    from django.utils import timezone

    from experiments.models import BeegfsConfigChange, NodeRequest

    staff = django_user_model.objects.create_superuser("root", password="x")
    client.force_login(staff)
    now = timezone.now()
    request = NodeRequest.objects.create(
        hostname="mgmt01",
        kind=NodeRequest.Kind.BEEGFS_TOPOLOGY,
        requested_by=staff,
        taken_by="mgmt01@mgmt01",
        taken_at=now,
        answered_at=now,
        result={"listings": []},
    )
    change = BeegfsConfigChange.objects.create(
        hostname="storage01",
        service="storage",
        conf="/etc/beegfs/beegfs-storage.conf",
        tuning_set="workers-2",
        before={"tuneNumWorkers": "12"},
        after={"tuneNumWorkers": "2"},
        applied_at=now,
        restart_s=1.5,
        online_s=3.0,
        restored_at=now,
        restore_outcome="restored",
    )
    for model, row, shown in (
        ("noderequest", request, "mgmt01@mgmt01"),
        ("beegfsconfigchange", change, "workers-2"),
    ):
        listing = client.get(f"/admin/experiments/{model}/")
        assert listing.status_code == 200, model
        page = listing.content.decode()
        assert shown in page and f"/admin/experiments/{model}/add/" not in page
        view = client.get(f"/admin/experiments/{model}/{row.pk}/change/")
        assert view.status_code == 200 and 'name="_save"' not in view.content.decode()
        assert client.get(f"/admin/experiments/{model}/add/").status_code == 403
        assert client.post(f"/admin/experiments/{model}/{row.pk}/change/", {}).status_code == 403
        assert (
            client.post(f"/admin/experiments/{model}/{row.pk}/delete/", {"post": "yes"}).status_code
            == 403
        )
    assert NodeRequest.objects.filter(pk=request.pk).exists()
    assert BeegfsConfigChange.objects.filter(pk=change.pk).exists()
