"""The REST API: token authentication without a session, permissions like the pages, UUIDs
in URLs, nested parts, filters and pagination."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from experiments.models import Drive, HardwareProfile, Metric, Run, TuningSet

pytestmark = pytest.mark.django_db


def test_anonymous_gets_json_401_not_a_login_redirect(testbed):
    for url in (
        "/api/",
        "/api/testbeds/",
        f"/api/testbeds/{testbed.uuid}/",
        "/api/runs/",
        "/api/runs/bulk/",
        "/api/schema/",
        "/api/compare/",
    ):
        response = APIClient().get(url)
        assert response.status_code in (401, 403), url
        assert not response.has_header("Location"), url
        if url != "/api/schema/":
            assert response["Content-Type"].startswith("application/json"), url


def test_bad_token_is_401(testbed):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    response = client.get("/api/testbeds/")
    assert response.status_code == 401
    assert "Invalid token" in response.json()["detail"]


def test_session_authentication_works_too(alice_client, testbed):
    response = alice_client.get("/api/testbeds/")
    assert response.status_code == 200
    assert response.json()["results"][0]["uuid"] == str(testbed.uuid)


def test_objects_are_addressed_by_uuid(api, testbed, profile, node, tuning_set):
    for url, obj in (
        (f"/api/testbeds/{testbed.uuid}/", testbed),
        (f"/api/hardware/{profile.uuid}/", profile),
        (f"/api/nodes/{node.uuid}/", node),
        (f"/api/tuning-sets/{tuning_set.uuid}/", tuning_set),
    ):
        data = api.get(url).json()
        assert data["uuid"] == str(obj.uuid)
        assert "id" not in data
    assert api.get(f"/api/testbeds/{testbed.pk}/").status_code == 404
    tb = api.get(f"/api/testbeds/{testbed.uuid}/").json()
    assert tb["members"][0]["node"] == str(node.uuid)
    assert tb["targets"][0]["raid_level"] == "0"
    hw = api.get(f"/api/hardware/{profile.uuid}/").json()
    assert hw["drives"][0]["model"] == "P4600" and hw["nics"][0]["rate_gbps"] == 100


def test_create_update_delete_hardware_with_parts(api):
    response = api.post(
        "/api/hardware/", {"name": "Gen10", "architecture": "aarch64", "sockets": 2}
    )
    assert response.status_code == 201, response.json()
    uuid = response.json()["uuid"]
    assert response.json()["owner"] == "alice"
    drive = api.post(
        f"/api/hardware/{uuid}/drives/", {"kind": "nvme", "count": 4, "interface": "pcie"}
    )
    assert drive.status_code == 400 and "pcie_lanes" in drive.json()
    drive = api.post(
        f"/api/hardware/{uuid}/drives/",
        {"kind": "nvme", "count": 4, "interface": "pcie", "pcie_gen": 4, "pcie_lanes": 4},
    )
    assert drive.status_code == 201
    nic = api.post(f"/api/hardware/{uuid}/nics/", {"kind": "ethernet", "rate_gbps": 25})
    assert nic.status_code == 201
    data = api.get(f"/api/hardware/{uuid}/").json()
    assert len(data["drives"]) == 1 and len(data["nics"]) == 1
    assert api.patch(f"/api/hardware/{uuid}/", {"memory_gib": 512}).json()["memory_gib"] == 512
    assert api.delete(f"/api/hardware/{uuid}/drives/{drive.json()['uuid']}/").status_code == 204
    assert not Drive.objects.filter(profile__uuid=uuid).exists()
    assert api.delete(f"/api/hardware/{uuid}/").status_code == 204


def test_others_read_but_do_not_write(bob_api, testbed, profile):
    assert bob_api.get(f"/api/testbeds/{testbed.uuid}/").json()["can_edit"] is False
    assert bob_api.patch(f"/api/testbeds/{testbed.uuid}/", {"name": "x"}).status_code == 403
    assert bob_api.delete(f"/api/hardware/{profile.uuid}/").status_code == 403
    assert (
        bob_api.post(
            f"/api/testbeds/{testbed.uuid}/pools/", {"pool_id": 2, "name": "fast"}
        ).status_code
        == 403
    )
    assert (
        bob_api.post(
            f"/api/hardware/{profile.uuid}/nics/", {"kind": "ethernet", "rate_gbps": 10}
        ).status_code
        == 403
    )


def test_staff_writes_anything(staff_api, testbed):
    response = staff_api.patch(f"/api/testbeds/{testbed.uuid}/", {"description": "by staff"})
    assert response.status_code == 200


def test_published_data_is_read_only_even_for_staff(staff_api, api, profile):
    HardwareProfile.objects.filter(pk=profile.pk).update(published=True)
    assert api.patch(f"/api/hardware/{profile.uuid}/", {"name": "x"}).status_code == 403
    assert staff_api.delete(f"/api/hardware/{profile.uuid}/").status_code == 403
    assert (
        staff_api.post(f"/api/hardware/{profile.uuid}/drives/", {"kind": "hdd"}).status_code == 403
    )


def test_testbed_parts(api, testbed, node):
    pool = api.post(f"/api/testbeds/{testbed.uuid}/pools/", {"pool_id": 2, "name": "fast"})
    assert pool.status_code == 201
    again = api.post(f"/api/testbeds/{testbed.uuid}/pools/", {"pool_id": 2, "name": "dup"})
    assert again.status_code == 400
    target = api.post(
        f"/api/testbeds/{testbed.uuid}/targets/",
        {
            "kind": "storage",
            "node": str(node.uuid),
            "raid_level": "10",
            "disks": 3,
            "pool": pool.json()["uuid"],
        },
    )
    assert target.status_code == 400 and "disks" in target.json()
    target = api.post(
        f"/api/testbeds/{testbed.uuid}/targets/",
        {
            "kind": "storage",
            "node": str(node.uuid),
            "raid_level": "10",
            "disks": 4,
            "pool": pool.json()["uuid"],
        },
    )
    assert target.status_code == 201, target.json()
    member = api.post(
        f"/api/testbeds/{testbed.uuid}/members/", {"node": str(node.uuid), "client": True}
    )
    assert member.status_code == 400  # already a member
    members = api.get(f"/api/testbeds/{testbed.uuid}/members/").json()
    assert members[0]["hostname"] == "stor1"
    bad = api.post(f"/api/testbeds/{testbed.uuid}/members/", {"node": "not-a-uuid", "client": True})
    assert bad.status_code == 400


def test_node_hostname_unique_per_owner_is_a_400(api, node, profile):
    response = api.post("/api/nodes/", {"hostname": "stor1", "profile": str(profile.uuid)})
    assert response.status_code == 400


def test_tuning_set_params_replace_and_revise(api, tuning_set):
    url = f"/api/tuning-sets/{tuning_set.uuid}/"
    data = api.get(url).json()
    assert {(p["scope"], p["key"]) for p in data["params"]} == {
        ("storage", "tuneNumWorkers"),
        ("striping", "chunksize"),
    }
    response = api.patch(
        url, {"params": [{"scope": "striping", "key": "chunksize", "value": "1m"}]}
    )
    assert response.status_code == 200, response.json()
    assert response.json()["effective"] == {"striping.chunksize": "1m"}
    assert response.json()["revision"] == data["revision"] + 1
    bad = api.patch(url, {"params": [{"scope": "striping", "key": "chunksize", "value": "lots"}]})
    assert bad.status_code == 400
    child = api.post(
        "/api/tuning-sets/",
        {
            "name": "child",
            "parent": str(tuning_set.uuid),
            "params": [{"scope": "os", "key": "vm.dirty_ratio", "value": "10"}],
        },
    )
    assert child.status_code == 201, child.json()
    assert child.json()["effective"]["striping.chunksize"] == "1m"
    loop = api.patch(url, {"parent": child.json()["uuid"]})
    assert loop.status_code == 400
    assert api.delete(url).status_code == 400  # a child inherits from it
    assert TuningSet.objects.count() == 2


def test_matrix_create_validates_axes(api, testbed):
    ok = api.post(
        "/api/matrices/",
        {
            "name": "m",
            "tool": "dd",
            "testbeds": [str(testbed.uuid)],
            "fixed_params": {"bs": "4k", "count": 1},
            "axes": [{"param": "count", "values": [1, 2]}],
            "repetitions": 1,
        },
    )
    assert ok.status_code == 201, ok.json()
    bad = api.post(
        "/api/matrices/",
        {
            "name": "m",
            "tool": "dd",
            "testbeds": [str(testbed.uuid)],
            "axes": [{"param": "nosuch", "values": [1]}],
        },
    )
    assert bad.status_code == 400 and "axes" in bad.json()
    rule = api.post(
        "/api/matrices/",
        {
            "name": "m",
            "tool": "dd",
            "testbeds": [str(testbed.uuid)],
            "exclusions": ["__import__('os')"],
        },
    )
    assert rule.status_code == 400


def test_runs_filters_and_cursor_pagination(api, testbed, tuning_set):
    items = [
        {
            "testbed": str(testbed.uuid),
            "tool": "fio" if i % 2 else "dd",
            "tuning_set": "base",
            "params": {"threads": i},
            "metrics": [{"name": "write_bw", "value": float(i + 1)}],
        }
        for i in range(7)
    ]
    assert api.post("/api/runs/bulk/", items).json()["created"] == 7
    page = api.get("/api/runs/", {"page_size": 3}).json()
    assert len(page["results"]) == 3 and page["next"]
    second = api.get(page["next"]).json()
    assert not {r["uuid"] for r in page["results"]} & {r["uuid"] for r in second["results"]}
    assert len(api.get("/api/runs/", {"tool": "fio"}).json()["results"]) == 3
    assert (
        len(
            api.get(
                "/api/runs/", {"testbed": str(testbed.uuid), "tuning_set": str(tuning_set.uuid)}
            ).json()["results"]
        )
        == 7
    )
    assert api.get("/api/runs/", {"testbed": "nope"}).status_code == 400
    huge = api.get("/api/runs/", {"page_size": 100000}).json()
    assert len(huge["results"]) == 7
    run = Run.objects.first()
    metrics = api.get("/api/metrics/", {"run": str(run.uuid)}).json()["results"]
    assert metrics == [
        {
            "run": str(run.uuid),
            "name": "write_bw",
            "value": metrics[0]["value"],
            "unit": "B/s",
            "stat": "value",
            "iteration": None,
            "primary": True,
            "extra": {},
            "source_ref": "",
        }
    ]


def test_page_size_is_capped(api, alice):
    HardwareProfile.objects.bulk_create(
        HardwareProfile(owner=alice, name=f"p{i}", architecture="x86_64") for i in range(510)
    )
    data = api.get("/api/hardware/", {"page_size": 10000}).json()
    assert data["count"] == 510 and len(data["results"]) == 500


def test_run_update_and_delete(api, bob_api, testbed, tuning_set):
    uuid = api.post(
        "/api/runs/",
        {"testbed": "bench", "tool": "dd", "metrics": [{"name": "write_bw", "value": 5.0}]},
    ).json()["uuid"]
    response = api.patch(
        f"/api/runs/{uuid}/",
        {"label": "renamed", "status": "published", "tuning_set": str(tuning_set.uuid)},
    )
    assert response.status_code == 200
    run = Run.objects.get(uuid=uuid)
    assert run.label == "renamed" and run.status == "imported" and run.tuning_set == tuning_set
    assert bob_api.delete(f"/api/runs/{uuid}/").status_code == 403
    assert api.delete(f"/api/runs/{uuid}/").status_code == 204
    assert not Metric.objects.exists()


def test_workers_read_only(api, staff_api):
    assert api.get("/api/workers/").status_code == 200
    assert staff_api.post("/api/workers/", {}).status_code == 405


def test_schema_and_docs(api, alice_client):
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert "/api/runs/bulk/" in paths and "/api/testbeds/{uuid}/" in paths
    assert "/api/compare/" in paths
    docs = alice_client.get("/api/docs/")
    assert docs.status_code == 200
    html = docs.content.decode()
    assert "swagger-ui" in html and "cdn" not in html.lower()
    # Swagger UI's assets are vendored (drf-spectacular-sidecar) and served by beeweb itself.
    import re

    assets = re.findall(r'(/static/drf_spectacular_sidecar/[^"\']+\.(?:js|css))', html)
    assert assets
    for asset in assets:
        assert alice_client.get(asset).status_code == 200, asset
    assert APIClient().get("/api/docs/").status_code == 302  # a page: sign in first
