"""Browser test: Playwright drives Debian's Chromium through the main inventory flow.

Log in, describe hardware, a node and a testbed with roles and targets, write two tuning
sets, diff them, and open the comparison of the published studies.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command

from tests.labs.browser import chromium, close_server_connections, new_page, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def page(live_server):
    with chromium() as browser:
        yield new_page(browser)
    close_server_connections()


def test_engineer_builds_a_testbed_and_compares(page, live_server, django_user_model):
    django_user_model.objects.create_user("erin", password="erin-secret-pw")
    call_command("load_published", verbosity=0)
    url = live_server.url

    page.goto(f"{url}/")
    assert "/login/" in page.url
    sign_in(page, url, "erin", "erin-secret-pw", goto=False)

    # Hardware profile with a drive and a NIC, added inline through htmx.
    page.goto(f"{url}/hardware/new/")
    page.fill("#id_name", "Lab NVMe server")
    page.select_option("#id_architecture", "aarch64")
    page.fill("#id_cpu_model", "Kunpeng 920")
    page.click("text=Save")
    page.wait_for_selector("h1:has-text('Lab NVMe server')")
    page.click("text=Add drives")
    page.wait_for_selector("#drive-form form")
    page.select_option("#drive-form #id_kind", "nvme")
    page.fill("#drive-form #id_count", "4")
    page.select_option("#drive-form #id_interface", "pcie")
    page.fill("#drive-form #id_seq_read_mbps", "3200")
    page.fill("#drive-form #id_seq_write_mbps", "1300")
    page.click("#drive-form >> text=Save")
    # PCIe without lanes is refused inline, then accepted.
    page.wait_for_selector("#drive-form .errorlist")
    page.fill("#drive-form #id_pcie_gen", "3")
    page.fill("#drive-form #id_pcie_lanes", "4")
    page.click("#drive-form >> text=Save")
    page.wait_for_selector("td:has-text('gen3 x4')")
    page.click("text=Add network adapters")
    page.wait_for_selector("#nic-form form")
    page.select_option("#nic-form #id_kind", "infiniband")
    page.fill("#nic-form #id_rate_gbps", "100")
    page.click("#nic-form >> text=Save")
    page.wait_for_selector("td:has-text('InfiniBand')")

    page.goto(f"{url}/nodes/new/")
    page.fill("#id_hostname", "lab-stor1")
    page.select_option("#id_profile", label="Lab NVMe server")
    page.click("text=Save")
    page.wait_for_selector("h1:has-text('lab-stor1')")

    # Testbed with roles and a RAID0 storage target; its limits name a bottleneck.
    page.goto(f"{url}/testbeds/new/")
    page.fill("#id_name", "Lab testbed")
    page.select_option("#id_fabric", "infiniband")
    page.click("text=Save")
    page.wait_for_selector("h1:has-text('Lab testbed')")
    page.click("text=Add node with roles")
    page.wait_for_selector("#member-form form")
    page.select_option("#member-form #id_node", label="lab-stor1 (erin)")
    page.check("#member-form #id_storage")
    page.check("#member-form #id_metadata")
    page.check("#member-form #id_management")
    page.click("#member-form >> text=Save")
    page.wait_for_selector("span.badge:has-text('storage')")
    page.click("text=Add target")
    page.wait_for_selector("#target-form form")
    page.select_option("#target-form #id_node", label="lab-stor1")
    page.select_option("#target-form #id_raid_level", "10")
    page.fill("#target-form #id_disks", "3")
    page.click("#target-form >> text=Save")
    page.wait_for_selector("#target-form .errorlist:has-text('even number')")
    page.fill("#target-form #id_disks", "4")
    page.click("#target-form >> text=Save")
    page.wait_for_selector("td:has-text('RAID10')")
    # 4 NVMe in RAID10: 12.8 GB/s read, 2.6 GB/s write, so the drives limit writes.
    assert "drives" in page.inner_text("#limits")
    assert "drives" in page.inner_text("#bottleneck")

    # Two tuning sets, the second inheriting from the first, then their diff.
    page.goto(f"{url}/tuning/new/")
    page.fill("#id_name", "Baseline")
    page.fill("#id_scope_storage", "tuneNumWorkers = 48\ntuneFileReadSize = 128k")
    page.fill("#id_scope_striping", "chunksize = 512k\nnumtargets = 4")
    page.click("text=Save")
    page.wait_for_selector("h1:has-text('Baseline')")
    page.goto(f"{url}/tuning/new/")
    page.fill("#id_name", "More workers")
    page.select_option("#id_parent", label="Baseline")
    page.fill("#id_scope_storage", "tuneNumWorkers = lots")
    page.click("text=Save")
    page.wait_for_selector("#field-scope_storage .errorlist")
    page.fill("#id_scope_storage", "tuneNumWorkers = 96\ntuneBrandNewKnob = 1")
    page.click("text=Save")
    page.wait_for_selector("h1:has-text('More workers')")
    assert "unknown key" in page.inner_text("main")
    page.select_option("select[name=b]", label="Baseline")
    page.click("text=Diff with…")
    page.wait_for_selector("#diff-summary")
    assert "2 keys differ" in page.inner_text("#diff-summary")
    assert "96" in page.inner_text("#diff-table")

    # The comparison of the published studies: Arm vs x86 vs POWER, then RAID0 vs RAID10.
    page.goto(f"{url}/compare/?metric=write_bw&x=param:threads&series=arch")
    page.wait_for_selector("#chart .main-svg")
    table = page.inner_text("#compare-table")
    assert "ppc64le (POWER)" in table and "aarch64 (Arm)" in table and "x86_64" in table
    page.goto(f"{url}/compare/?metric=write_bw&x=tool&series=raid&tool=dd")
    page.wait_for_selector("#chart .main-svg")
    table = page.inner_text("#compare-table")
    assert "RAID0" in table and "RAID10" in table
    # Changing the series through the form updates the result with htmx.
    page.select_option("#series", "tool")
    page.wait_for_function(
        "() => document.querySelector('#compare-table').innerText.includes('dd')"
    )
