"""Issue 16, item 5: forms validate on save, list every error at once with the field named,
and share their rules with the API (model field validators, ``validate_matrix``,
``tuning_keys.check_conf``, ``importing.binary_problem``).

The exact cases of the issue: matrices with ``size = 32x``, ``rw = sideways`` and
``pow2(1..``; a drive of -100 MB/s; the hostname 'bad host name!'; zero sockets and zero
drives; a published node's hostname twice in a testbed; a PNG imported as run output.
"""

from __future__ import annotations

import html
import struct
import zlib
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from experiments.models import (
    Drive,
    HardwareProfile,
    Matrix,
    Node,
    Run,
    TestbedNode,
    TuningSet,
)
from experiments.shared.validators import hostname_problem

pytestmark = pytest.mark.django_db


def tiny_png() -> bytes:
    """A real 1x1 RGB PNG (signature, IHDR, IDAT, IEND with their CRCs)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data)
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    chunks = chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + chunks


@pytest.fixture
def api(alice):
    client = APIClient()
    client.force_authenticate(alice)
    return client


def page_errors(response) -> list[str]:
    """Every error message of the form on the page, unescaped."""
    form = response.context["form"]
    return [html.unescape(m) for messages in form.errors.values() for m in messages]


# --- Matrices -----------------------------------------------------------------------------


def _matrix_form(testbed, **overrides) -> dict:
    data = {
        "name": "sweep",
        "tool": "fio",
        "launch_mode": "single",
        "tasks_per_node": 1,
        "testbeds": [testbed.pk],
        "repetitions": 1,
        "timeout_s": 600,
        "params_text": "size = 16m",
        "axes_text": "rw = write, read",
        "exclusions_text": "",
    }
    data.update(overrides)
    return data


def test_matrix_form_lists_every_error_of_the_issue_at_once(alice_client, bench):
    response = alice_client.post(
        reverse("experiments:matrix_new"),
        _matrix_form(
            bench,
            params_text="size = 32x\nbs = 1m\nthis line has no equals sign",
            axes_text="rw = sideways, write\nnumjobs = pow2(1..",
            repetitions=0,
        ),
    )
    assert response.status_code == 200
    assert Matrix.objects.count() == 0
    errors = response.context["form"].errors
    params, axes = errors["params_text"], errors["axes_text"]
    assert "line 3: expected 'name = value', got 'this line has no equals sign'" in params
    assert "size: expected a size such as 4k, 1m or 2g, got '32x'" in params
    assert any(m.startswith("rw: 'sideways' is not one of read, write") for m in axes)
    assert (
        "line 2: numjobs: 'pow2(1..' is not a range; write pow2(1..64) or linear(4..16, 4)" in axes
    )
    assert errors["repetitions"]
    text = html.unescape(response.content.decode())
    assert "32x" in text and "sideways" in text and "pow2(1.." in text


def test_matrix_form_refuses_cells_the_tool_cannot_build(alice_client, bench):
    """Each value is valid alone, but fio refuses a block size above the file size: the cells
    are named, the same problem of five cells said once, nothing saved."""
    response = alice_client.post(
        reverse("experiments:matrix_new"),
        _matrix_form(
            bench,
            params_text="size = 64k\nrw = write",
            axes_text="bs = 4k, 128k, 256k, 512k, 1m, 2m",
        ),
    )
    assert response.status_code == 200
    assert Matrix.objects.count() == 0
    assert response.context["form"].non_field_errors() == [
        "cells bs=128k; bs=256k; bs=512k and 2 more: bs: is larger than the size of each "
        "file (size / nrfiles)"
    ]


def test_matrix_cell_problems_are_capped(alice_client, bench):
    """25 directories outside the benchmark directory: 25 different problems, of which the
    first 20 are listed and the rest counted."""
    directories = ", ".join(f"/elsewhere/d{n}" for n in range(25))
    response = alice_client.post(
        reverse("experiments:matrix_new"),
        _matrix_form(bench, axes_text=f"rw = write\ndirectory = {directories}"),
    )
    assert response.status_code == 200
    assert Matrix.objects.count() == 0
    errors = response.context["form"].non_field_errors()
    assert len(errors) == 21 and errors[-1] == "and 5 more problems"
    assert errors[0].startswith(
        "cell rw=write, directory=/elsewhere/d0: directory: '/elsewhere/d0' is outside the "
        "benchmark directory"
    )


def test_matrix_form_saves_a_valid_matrix(alice_client, bench):
    response = alice_client.post(
        reverse("experiments:matrix_new"),
        _matrix_form(bench, axes_text="rw = write, read\nnumjobs = pow2(1..4)"),
    )
    assert response.status_code == 302
    matrix = Matrix.objects.get()
    assert matrix.axes[1] == {"param": "numjobs", "range": {"start": 1, "stop": 4, "scale": "pow2"}}


def test_matrix_yaml_import_lists_every_error(alice_client, bench):
    text = (
        "name: bad\ntool: fio\ntestbeds: [bench]\nparams: {size: 32x}\n"
        "axes:\n  rw: [sideways]\n  numjobs: {range: {start: 0, stop: 4}}\n"
    )
    response = alice_client.post(reverse("experiments:matrix_import"), {"text": text})
    assert response.status_code == 400
    assert Matrix.objects.count() == 0
    (message,) = page_errors(response)
    assert "params: size: expected a size such as 4k, 1m or 2g, got '32x'" in message
    assert "range needs 0 < start <= stop" in message


def test_matrix_yaml_import_refuses_cells_that_do_not_build(alice_client, bench):
    text = "name: t\ntool: fio\ntestbeds: [bench]\nparams: {time_based: true}\n"
    text += "axes:\n  rw: [write, read]\n"
    response = alice_client.post(reverse("experiments:matrix_import"), {"text": text})
    assert response.status_code == 400
    assert Matrix.objects.count() == 0
    (message,) = page_errors(response)
    assert message == "cells: cells rw=write; rw=read: runtime: time_based needs a runtime"


def test_matrix_api_answers_400_with_every_field(api, bench):
    data = {
        "name": "bad",
        "tool": "fio",
        "testbeds": [str(bench.uuid)],
        "fixed_params": {"size": "32x", "bs": "1m"},
        "axes": [{"param": "rw", "values": ["sideways", "write", "upwards"]}],
        "repetitions": 0,
    }
    response = api.post("/api/matrices/", data, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["fixed_params"] == ["size: expected a size such as 4k, 1m or 2g, got '32x'"]
    assert [m.split(" is not")[0] for m in body["axes"]] == ["rw: 'sideways'", "rw: 'upwards'"]
    assert body["repetitions"]  # the field's own message (DRF), in the same answer
    assert Matrix.objects.count() == 0

    data = {**data, "fixed_params": {"size": "64k", "bs": "1m"}, "repetitions": 1}
    data["axes"] = [{"param": "rw", "values": ["write"]}]
    response = api.post("/api/matrices/", data, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "cells": ["cell rw=write: bs: is larger than the size of each file (size / nrfiles)"]
    }
    assert Matrix.objects.count() == 0


def test_matrix_form_help_is_markup_not_escaped_text(alice_client):
    text = alice_client.get(reverse("experiments:matrix_new")).content.decode()
    assert "<code>size = 1g</code>" in text
    assert "<code>numjobs &gt; clients * cores</code>" in text
    assert "&lt;code&gt;" not in text and "&amp;gt;" not in text


def test_disabled_launch_button_says_why(alice_client, testbed, alice):
    """A testbed without a benchmark directory: the preview lists the cells that cannot run
    and the Launch button is disabled, looks it and says why."""
    matrix = Matrix.objects.create(
        owner=alice, name="m", tool="fio", fixed_params={"size": "16m"}, repetitions=1
    )
    matrix.testbeds.add(testbed)
    text = alice_client.get(matrix.get_absolute_url()).content.decode()
    button = text[text.index('id="launch"') : text.index("</button>", text.index('id="launch"'))]
    assert " disabled " in button and 'aria-describedby="launch-why"' in button
    assert 'title="Cannot launch: 1 cell of the preview cannot run' in button
    assert 'id="launch-why"' in text
    css = Path(__file__).parents[2] / "static" / "beeweb.css"
    assert ".button:disabled" in css.read_text()


# --- Tuning sets --------------------------------------------------------------------------


def test_tuning_form_lists_every_bad_line(alice_client):
    response = alice_client.post(
        reverse("experiments:tuningset_new"),
        {
            "name": "t",
            "scope_os": "vm.swappiness = 10\nvm.dirty_ratio = lots\n"
            "no equals here\nvm.swappiness = 20\nvm.vfs_cache_pressure = -1\n",
            "scope_storage": "tuneNumWorkers = many\n",
        },
    )
    assert response.status_code == 200
    assert TuningSet.objects.count() == 0
    errors = response.context["form"].errors
    assert errors["scope_os"] == [
        "line 2: vm.dirty_ratio expects a whole number, got 'lots'",
        "line 3: expected 'key = value', got 'no equals here'",
        "line 4: vm.swappiness is given twice",
        "line 5: vm.vfs_cache_pressure must be at least 0, got -1",
    ]
    assert errors["scope_storage"] == ["line 1: tuneNumWorkers expects a whole number, got 'many'"]


def test_conf_import_lists_every_bad_line(alice_client, tuning_set):
    response = alice_client.post(
        reverse("experiments:tuningset_import", args=[tuning_set.uuid]),
        {"scope": "os", "text": "vm.dirty_ratio = x\nvm.swappiness = y\n"},
    )
    assert response.status_code in (200, 400)
    assert page_errors(response) == [
        "line 1: vm.dirty_ratio expects a whole number, got 'x'",
        "line 2: vm.swappiness expects a whole number, got 'y'",
    ]
    assert not tuning_set.params.filter(scope="os").exists()


# --- Inventory bounds ---------------------------------------------------------------------


def test_drive_of_negative_bandwidth_and_zero_count_is_refused(alice_client, api, profile):
    url = reverse("experiments:part_new", args=["hardware", profile.uuid, "drive"])
    before = Drive.objects.count()
    response = alice_client.post(
        url, {"kind": "ssd", "count": 0, "seq_read_mbps": -100, "purpose": "data"}
    )
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert errors["seq_read_mbps"] == ["must be greater than zero (got -100)"]
    assert errors["count"]
    assert Drive.objects.count() == before

    response = api.post(
        f"/api/hardware/{profile.uuid}/drives/",
        {"kind": "ssd", "count": 0, "seq_read_mbps": -100, "rand_write_iops": 0},
        format="json",
    )
    assert response.status_code == 400
    body = response.json()
    assert body["seq_read_mbps"] == ["must be greater than zero (got -100)"]
    assert body["rand_write_iops"] == ["must be greater than zero (got 0)"]
    assert body["count"]
    assert Drive.objects.count() == before


def test_zero_sockets_are_refused(alice_client, api):
    response = alice_client.post(
        reverse("experiments:hardware_new"),
        {"name": "x", "architecture": "x86_64", "sockets": 0, "memory_gib": 0},
    )
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert errors["sockets"] == ["must be at least 1 (got 0); leave it empty when not known"]
    assert errors["memory_gib"] == ["must be greater than zero (got 0)"]
    response = api.post(
        "/api/hardware/",
        {"name": "x", "architecture": "x86_64", "sockets": 0, "cores_per_socket": 0},
        format="json",
    )
    assert response.status_code == 400
    assert set(response.json()) == {"sockets", "cores_per_socket"}
    assert not HardwareProfile.objects.filter(name="x").exists()


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("stor01", True),
        ("stor-01.lab.example.org", True),
        ("a" * 63, True),
        ("bad host name!", False),
        ("node_1", False),
        ("-stor", False),
        ("stor-", False),
        ("stor..lab", False),
        ("a" * 64, False),
        (".".join(["a" * 60] * 5), False),  # 304 characters
    ],
)
def test_hostname_rules(name, ok):
    assert (hostname_problem(name) is None) is ok


def test_bad_hostname_and_address_are_refused(alice_client, api, profile):
    response = alice_client.post(
        reverse("experiments:node_new"),
        {"hostname": "bad host name!", "profile": profile.pk, "address": "not an address!"},
    )
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert errors["hostname"][0].startswith("'bad host name!' is not a host name")
    assert errors["address"] == ["'not an address!' is neither an IP address nor a host name"]
    response = api.post(
        "/api/nodes/",
        {"hostname": "bad host name!", "profile": str(profile.uuid), "address": "fe80::1"},
        format="json",
    )
    assert response.status_code == 400
    assert set(response.json()) == {"hostname"}
    assert not Node.objects.exists()
    response = api.post(
        "/api/nodes/",
        {"hostname": "stor-02.lab", "profile": str(profile.uuid), "address": "10.0.0.2"},
        format="json",
    )
    assert response.status_code == 201


def test_published_hostname_joins_a_testbed_once(alice_client, api, testbed, node, profile):
    """alice's stor1 is in her testbed; the published node stor1 (the same machine in a
    study) is refused, by the page and by the API: a published node joins no testbed of a
    user's (issue 25, finding 9), and the node picker does not offer it."""
    published = Node.objects.create(
        owner=None, published=True, shared=True, hostname="stor1", profile=profile
    )
    url = reverse("experiments:part_new", args=["testbeds", testbed.uuid, "member"])
    page = alice_client.get(url).content.decode()
    assert "stor1 (published)" not in page and "stor1 (alice)" in page
    response = alice_client.post(url, {"node": published.pk, "client": "on"})
    assert response.status_code == 200
    assert response.context["form"].errors["node"] == [
        "stor1 is a published node (a machine of a study, read-only): it joins no testbed "
        "of yours; add your own node of that host instead."
    ]
    response = api.post(
        f"/api/testbeds/{testbed.uuid}/members/",
        {"node": str(published.uuid), "client": True},
        format="json",
    )
    assert response.status_code == 400
    assert "stor1 is a published node" in response.json()["node"][0]
    assert TestbedNode.objects.filter(testbed=testbed).count() == 1
    text = alice_client.get(testbed.get_absolute_url()).content.decode()
    assert text.count(f'href="{published.get_absolute_url()}"') == 0


# --- Imports ------------------------------------------------------------------------------


def test_png_import_is_refused_on_the_page(alice_client, bench):
    response = alice_client.post(
        reverse("experiments:run_import"),
        {
            "testbed": bench.uuid,
            "files": [SimpleUploadedFile("results.png", tiny_png(), "image/png")],
        },
    )
    assert response.status_code == 200
    assert page_errors(response) == [
        "Nothing was imported.",
        "results.png is a PNG image, not text output of a benchmark.",
    ]
    assert not Run.objects.exists()


def test_png_import_is_refused_by_the_api(api, bench):
    text = tiny_png().decode("utf-8", errors="replace").replace("\x00", "")
    response = api.post(
        "/api/runs/", {"testbed": str(bench.uuid), "raw_output": text}, format="json"
    )
    assert response.status_code == 400
    assert response.json() == {
        "errors": {
            "raw_output": "is a PNG image, not text output of a benchmark; nothing was stored"
        }
    }
    garbage = "".join(chr(c) for c in range(1, 9)) * 50 + "\ufffd" * 100
    response = api.post(
        "/api/runs/", {"testbed": str(bench.uuid), "raw_output": garbage}, format="json"
    )
    assert response.status_code == 400
    assert "is not text: 450 of its 500 characters" in response.json()["errors"]["raw_output"]
    assert not Run.objects.exists()


def test_png_import_is_skipped_by_import_results(bench, tmp_path, capsys):
    path = tmp_path / "results.png"
    path.write_bytes(tiny_png())
    with pytest.raises(CommandError, match="1 of 1 files were not fully imported"):
        call_command("import_results", str(path), testbed="bench")
    assert "results.png is a PNG image, not text output of a benchmark, skipped" in (
        capsys.readouterr().err
    )
    assert not Run.objects.exists()
