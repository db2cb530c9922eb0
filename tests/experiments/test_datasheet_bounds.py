"""Inputs no datasheet has are refused, and no interval goes below zero (issue 25, finding
8): a 500 GHz CPU, 99,999,999 GiB of memory or BeeGFS version "seven" answer the form with
a message and the API with 400 (never a 500); a confidence interval of a throughput never
has a negative end, in the API or on the page."""

from __future__ import annotations

import pytest

from experiments import forms
from experiments.models import HardwareProfile, Testbed
from experiments.shared import stats
from tests.helpers.api import token_client
from tests.helpers.comparison import add_run, make_testbed

pytestmark = pytest.mark.django_db

PROFILE = {"name": "srv", "architecture": "x86_64"}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("clock_ghz", 500),
        ("memory_gib", 99_999_999),
        ("sockets", 1000),
        ("cores_per_socket", 30000),
        ("threads_per_core", 64),
        ("numa_domains", 10000),
        ("memory_channels", 30000),
        ("tdp_watts", 1_000_000),
    ],
)
def test_profile_form_refuses_what_no_datasheet_states(field, value):
    form = forms.HardwareProfileForm(data={**PROFILE, field: value})
    assert not form.is_valid()
    assert "at most" in " ".join(form.errors[field])


def test_profile_form_accepts_real_servers():
    """A 32-socket, 64 TiB, 5.0 GHz SMT8 machine and a small Arm board are real."""
    big = {
        "sockets": 32,
        "cores_per_socket": 192,
        "threads_per_core": 8,
        "clock_ghz": 5.0,
        "numa_domains": 128,
        "memory_gib": 65536,
        "memory_channels": 384,
        "tdp_watts": 500,
    }
    assert forms.HardwareProfileForm(data={**PROFILE, **big}).is_valid()
    small = {"sockets": 1, "cores_per_socket": 4, "clock_ghz": 1.5, "memory_gib": 0.5}
    assert forms.HardwareProfileForm(data={**PROFILE, **small}).is_valid()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("capacity_gb", 1e12),
        ("seq_read_mbps", 5e7),
        ("seq_write_mbps", 5e7),
        ("rand_read_iops", 1e12),
        ("pcie_lanes", 64),
        ("count", 100_000),
    ],
)
def test_drive_form_refuses_what_no_datasheet_states(field, value):
    data = {"kind": "nvme", "count": 1, "purpose": "data", field: value}
    form = forms.DriveForm(data=data)
    assert not form.is_valid()
    assert "at most" in " ".join(form.errors[field])


def test_nic_form_bounds_rate_and_usable_bandwidth():
    form = forms.NicForm(data={"kind": "ethernet", "rate_gbps": 100_000, "ports": 1, "count": 1})
    assert not form.is_valid() and "at most" in " ".join(form.errors["rate_gbps"])
    # A link carries no more than its line rate: 100 Gb/s is 12.5 GB/s.
    data = {"kind": "infiniband", "rate_gbps": 100, "ports": 1, "count": 1, "usable_gbytes": 50}
    form = forms.NicForm(data=data)
    assert not form.is_valid() and "line rate" in str(form.errors)
    assert forms.NicForm(data={**data, "usable_gbytes": 12.4}).is_valid()


@pytest.mark.parametrize("version", ["seven", "7.x", "latest", "7..4", "v", "1" * 40])
def test_testbed_form_refuses_a_version_that_is_not_one(version, alice):
    form = forms.TestbedForm(data={"name": "tb", "beegfs_version": version}, user=alice)
    assert not form.is_valid()
    assert "version" in " ".join(form.errors["beegfs_version"])


@pytest.mark.parametrize("version", ["7.4.5", "8.0", "7.1.3", "2015.03-r17", "7.3.2-1", "8.1.0"])
def test_testbed_form_accepts_real_versions(version, alice):
    form = forms.TestbedForm(data={"name": "tb", "beegfs_version": version}, user=alice)
    form.is_valid()
    assert "beegfs_version" not in form.errors


def test_api_answers_400_with_the_reason(alice):
    api = token_client(alice)
    response = api.post(
        "/api/hardware/",
        {**PROFILE, "clock_ghz": 500, "memory_gib": 99_999_999, "sockets": 99_999_999},
        format="json",
    )
    assert response.status_code == 400, response.content
    body = response.json()
    assert set(body) >= {"clock_ghz", "memory_gib", "sockets"}
    assert "GHz" in " ".join(body["clock_ghz"])
    assert not HardwareProfile.objects.exists()
    response = api.post("/api/testbeds/", {"name": "tb", "beegfs_version": "seven"}, format="json")
    assert response.status_code == 400 and "beegfs_version" in response.json()
    assert not Testbed.objects.exists()
    profile = api.post("/api/hardware/", PROFILE, format="json").json()
    response = api.post(
        f"/api/hardware/{profile['uuid']}/drives/",
        {"kind": "hdd", "count": 1, "capacity_gb": 1e15},
        format="json",
    )
    assert response.status_code == 400 and "capacity_gb" in response.json()
    response = api.post(
        f"/api/hardware/{profile['uuid']}/nics/",
        {"kind": "ethernet", "rate_gbps": 1e9},
        format="json",
    )
    assert response.status_code == 400 and "rate_gbps" in response.json()


def test_published_studies_are_within_the_bounds():
    from django.core.management import call_command

    from experiments.models import Drive, Nic

    call_command("load_published", verbosity=0)
    objects = [*HardwareProfile.objects.all(), *Drive.objects.all(), *Nic.objects.all()]
    objects += list(Testbed.objects.all())
    assert objects
    for obj in objects:
        obj.full_clean(validate_unique=False, validate_constraints=False)


def test_interval_of_a_throughput_never_goes_below_zero():
    low, high = stats.confidence_interval(2, 1.0, 3.0, floor=0.0)
    assert low == 0.0 and high > 1.0
    # Without a floor (a quantity that may be negative) the t interval as it is.
    assert stats.confidence_interval(2, 1.0, 3.0)[0] < 0


def test_compare_api_interval_is_clipped_at_zero(alice):
    """n = 2 of a throughput with a wide spread: the t interval's lower end was -0.84."""
    tb = make_testbed(alice, "lab", "x86_64", "0")
    add_run(tb, 0.1e9, threads=4)
    add_run(tb, 1.0e9, threads=4)
    add_run(tb, 0.2e9, threads=8)
    add_run(tb, 0.3e9, threads=8)
    add_run(tb, 3.0e9, threads=8)
    data = (
        token_client(alice)
        .get("/api/compare/", {"metric": "write_bw", "x": "param:threads"})
        .json()
    )
    assert [p["n"] for p in data["points"]] == [2, 3]
    for p in data["points"]:
        assert p["ci_low"] is not None and p["ci_low"] >= 0.0, p
        assert p["ci_high"] > p["mean"]
