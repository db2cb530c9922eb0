"""Browser test of issue 26's BeeGFS flow on a real cluster: import the live topology, launch
StorageBench RAID0 vs RAID10, see the result.

The cluster is tests/labs/beegfs.py ``cluster_lab`` on the network-namespace lab: node1 runs
the management daemon and the metadata server, node2 a storage server with two targets on a
btrfs RAID0 (two loop files), node3 one with two targets on a btrfs RAID10 (four). Each node has
its own beeweb worker in its namespace (reaching PostgreSQL and Redis through the lab's
gateway); the web server (runserver) runs on this host.

alice described her four storage targets by hand (name, BeeGFS id, RAID level: what no listing
says), in a testbed with no nodes yet. In Chromium she imports the testbed from the live cluster
through node1's worker (the import keeps her names and RAID levels and adds the roles, the
metadata target and the capacities), defines a StorageBench matrix (write, read × the four
targets) on the matrix form, launches it (the live cluster is as stored: no question), watches
it finish on the matrix page, and opens "RAID0 vs RAID10, StorageBench per target": the chart is
drawn and the sentence names both RAID levels; the testbed's limits then carry the ceilings
StorageBench measured. No figure is asserted (loop files on one disk).
"""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.labs import ROOT, Stack, runs, wait_for, wait_for_workers
from tests.labs.beegfs import node_env
from tests.labs.browser import CHROMIUM, chromium, new_page, sign_in

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get("DATABASE_URL", "").startswith("postgres"),
        reason="the namespaces reach the database over the network: PostgreSQL only",
    ),
    # Checked before the BeeGFS lab is built (a module fixture, set up first).
    pytest.mark.skipif(
        not os.path.exists(CHROMIUM),
        reason="Debian's chromium is not installed (apt-get install chromium)",
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("playwright") is None, reason="playwright is not installed"
    ),
]

ALICE = ("alice", "alice-beegfs-pw")
TARGETS = ("node2-t1", "node2-t2", "node3-t1", "node3-t2")
# "RAID0 vs RAID10, StorageBench per target" (as tests/test_beegfs_storagebench.py): each
# RAID level's two targets pooled, the runs told apart by their target only, which is ignored.
COMPARE = (
    "metric={metric}&x=tool&series=raid&tool=storagebench&baseline=10&ignore=target&matrix={matrix}"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def live_targets(lab) -> dict[int, str]:
    """BeeGFS storage target id -> the storage server (node name) holding it."""
    out = {}
    for line in lab.ctl("--listtargets", "--longnodes").splitlines():
        fields = line.split()
        if fields and fields[0].isdigit():
            out[int(fields[0])] = line.split("beegfs-storage", 1)[1].split()[0]
    return out


@pytest.fixture
def beegfs_stack(beegfs_cluster, netns_lab, tmp_path):
    """alice's testbed ``tb`` (no nodes yet; her four named storage targets with their BeeGFS
    ids and RAID levels), a worker per lab node, and a real web server on this host;
    ``(url, stack, layout)`` with ``layout`` target name -> [BeeGFS id, RAID level, disks]."""
    lab = beegfs_cluster
    ids = live_targets(lab)
    by_server = {h: sorted(t for t, s in ids.items() if s == h) for h in ("node2", "node3")}
    assert [len(v) for v in by_server.values()] == [2, 2], ids
    stack = Stack(tmp_path)
    try:
        # Patience on a busy machine: the node's answer to the live import and to the check
        # before a launch.
        stack.env.update({"BEEWEB_LIVE_TOPOLOGY_SECONDS": "120", "BEEWEB_LIVE_CHECK_SECONDS": "60"})
        bench = tmp_path / "bench"
        bench.mkdir()
        nodes = {n.hostname: {"owner": "alice", "address": n.address} for n in netns_lab.nodes}
        testbed = {
            "name": "tb",
            "owner": "alice",
            "benchmark_dir": str(bench),
            "members": {},
            "targets": [{"node": t.split("-")[0], "name": t, "path": ""} for t in TARGETS],
        }
        stack.call(
            "inventory", {"users": {ALICE[0]: ALICE[1]}, "nodes": nodes, "testbeds": [testbed]}
        )
        # What no listing says: node2's targets lie on a btrfs RAID0 over 2 devices, node3's
        # on a RAID10 over 4 (as the target edit page would record it).
        layout = {
            f"{server}-t{i}": [tid, raid, disks]
            for server, raid, disks in (("node2", "0", 2), ("node3", "10", 4))
            for i, tid in enumerate(by_server[server], start=1)
        }
        stack.shell(
            "from experiments.models import Target\n"
            f"for name, (tid, raid, disks) in {layout!r}.items():\n"
            "    Target.objects.filter(name=name).update(\n"
            "        target_id=tid, raid_level=raid, disks=disks, filesystem='btrfs')\n"
        )
        hosts = [n.hostname for n in netns_lab.nodes]
        stack.node_workers(
            netns_lab,
            {"BEEWEB_NODE_DIRS": str(bench)},
            per_node={h: node_env(lab) for h in hosts},
        )
        wait_for_workers(stack, *(f"{h}@{h}" for h in hosts), agents=True)
        port = free_port()
        web = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
            cwd=ROOT,
            env={**stack.env, "DEBUG": "true"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        stack.procs.append(web)
        url = f"http://127.0.0.1:{port}"

        def up() -> bool:
            try:
                return urllib.request.urlopen(f"{url}/login/", timeout=2).status == 200
            except OSError:
                return False

        assert wait_for(up, 60), "the web server did not start"
        yield url, stack, layout
    finally:
        stack.close()


def test_live_import_then_storagebench_raid0_vs_raid10(beegfs_stack):
    url, stack, layout = beegfs_stack
    began = time.monotonic()
    with chromium() as browser:
        page = new_page(browser, timeout_ms=60_000)
        sign_in(page, url, *ALICE)
        (tb_uuid,) = stack.sql("SELECT uuid::text FROM experiments_testbed WHERE name = 'tb'")[0]

        # Import from the live cluster: node1's worker reads it; the preview lists what the
        # management daemon has (four storage targets and the metadata target), then Save.
        page.goto(f"{url}/testbeds/{tb_uuid}/")
        page.click("#topology-live")
        page.wait_for_selector("#id_node")
        page.select_option("#id_node", label="node1")
        page.click("#live-read")
        page.wait_for_selector("#live-targets, #live-error", timeout=180_000)
        assert page.locator("#live-error").count() == 0, page.inner_text("#live-error")
        rows = [r.split("\t") for r in page.locator("#live-targets tbody tr").all_inner_texts()]
        storage = sorted((r[0], r[1]) for r in rows if r[0].startswith("storage "))
        assert storage == sorted(
            (f"storage {tid}", name.split("-")[0]) for name, (tid, _, _) in layout.items()
        ), rows
        assert [r[1] for r in rows if r[0].startswith("metadata ")] == ["node1"], rows
        assert "Nothing is saved yet" in page.inner_text("main")
        page.click("#live-save")
        page.wait_for_url(f"{url}/testbeds/{tb_uuid}/")
        assert page.inner_text("#live-source").startswith("read by node1"), page.inner_text(
            "#live-source"
        )
        assert "Imported the live BeeGFS topology read by node1" in page.inner_text("main")
        # Her names and RAID levels stayed; the import added what the daemons have.
        text = page.inner_text("main")
        for name in TARGETS:
            assert name in text, text
        assert "RAID0" in text and "RAID10" in text, text
        assert stack.sql(
            "SELECT n.hostname, m.management, m.metadata, m.storage FROM experiments_testbednode m"
            " JOIN experiments_node n ON n.id = m.node_id ORDER BY 1"
        ) == [
            ("node1", True, True, False),
            ("node2", False, False, True),
            ("node3", False, False, True),
        ]
        imported = time.monotonic() - began

        # A StorageBench matrix on the form: write and read over the four targets.
        page.goto(f"{url}/matrices/new/")
        page.fill("#id_name", "RAID0 vs RAID10")
        page.select_option("#id_tool", "storagebench")
        page.get_by_label("tb", exact=True).check()
        page.fill("#id_repetitions", "1")
        page.fill("#id_timeout_s", "300")
        page.fill("#id_params_text", "blocksize = 1m\nsize = 16m\nthreads = 2")
        page.fill("#id_axes_text", f"direction = write, read\ntarget = {', '.join(TARGETS)}")
        page.click("#object-form button[type=submit]")
        page.wait_for_url(re.compile(r"/matrices/[0-9a-f-]+/$"))
        matrix = page.url.rstrip("/").rsplit("/", 1)[1]
        assert "8</strong> runs" in page.inner_html("#plan-summary")

        # Launch: the live cluster is as just imported, so no "Launch anyway" question.
        launched = time.monotonic()
        page.click("#launch")
        page.wait_for_selector("#progress-text, #launch-anyway")
        assert page.locator("#launch-anyway").count() == 0, page.inner_text("main")[:3000]
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            progress = page.inner_text("#matrix-progress")
            if "8 of 8 finished" in progress:
                break
            time.sleep(1)
        else:
            logs = "\n".join(stack.worker_log(f"{h}@{h}")[-1500:] for h in ("node2", "node3"))
            pytest.fail(f"the matrix did not finish: {progress[:500]}\n{logs}")
        ran = time.monotonic() - launched
        done = runs(stack, "RAID0 vs RAID10")
        errors = [(r["target"], r["params"].get("direction"), r["error"]) for r in done]
        assert "succeeded 8" in page.inner_text("#matrix-progress"), errors
        assert sorted((r["target"], r["params"]["direction"]) for r in done) == sorted(
            (t, d) for t in TARGETS for d in ("write", "read")
        )

        # The comparison: RAID0 vs RAID10 per target, chart and sentence, for both directions.
        sentences = {}
        for metric in ("write_bw", "read_bw"):
            page.goto(f"{url}/compare/?" + COMPARE.format(metric=metric, matrix=matrix))
            page.wait_for_selector("#chart .main-svg")  # plotly drew the chart
            table = page.inner_text("#compare-table")
            assert "RAID0" in table and "RAID10" in table, table
            (sentence,) = page.locator("#baseline-sentences > li").all_inner_texts()
            assert sentence.startswith("RAID0 "), sentence
            # Which of the two is faster depends on the machine's disks, not on beeweb: any of
            # the sentence's three forms (faster, slower, equal) names both configurations.
            assert (
                "than RAID10 with storagebench" in sentence
                or "RAID0 and RAID10 are equal in" in sentence
                or "as RAID10" in sentence
            ), sentence
            assert "ignoring target node2-t1 | node2-t2 vs node3-t1 | node3-t2" in sentence
            sentences[metric] = sentence

        # The testbed's limits now carry the targets' ceilings StorageBench measured.
        page.goto(f"{url}/testbeds/{tb_uuid}/")
        limits = page.inner_text("#limits")
        assert "storage targets (StorageBench)" in limits, limits
        assert "measured by StorageBench run" in limits, limits
    print(
        f"\nbrowser: live import {imported:.1f} s after sign-in; the 8-run StorageBench matrix "
        f"finished {ran:.1f} s after Launch; whole flow {time.monotonic() - began:.1f} s"
    )
    for metric, sentence in sentences.items():
        print(f"{metric}: {sentence}")
