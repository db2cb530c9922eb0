"""The network-namespace lab: nodes reach each other, the services behind the forwarder, and
real tools (psql, redis-cli, qperf) across the bridge; nothing is left behind."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.labs.netns import LabNode, NetnsLab, TcpForwarder, in_netns

ROOT = Path(__file__).resolve().parents[1]
NETNS_NODES = 3
NETNS_FORWARD = [5432, 6379]
QPERF_PORT = 19765


def reachable(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=2).close()
    except OSError:
        return False
    return True


def need_service(port: int, name: str) -> None:
    if not reachable("127.0.0.1", port):
        pytest.skip(f"{name} does not listen on 127.0.0.1:{port} here")


def lab_leftovers(pid: int) -> list[str]:
    """Namespaces and links whose names belong to the lab of ``pid``."""
    names = subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True, check=True
    ).stdout.split()
    links = json.loads(
        subprocess.run(
            ["ip", "-j", "link", "show"], capture_output=True, text=True, check=True
        ).stdout
    )
    found = [n for n in names if n.startswith(f"bw{pid}-")]
    found += [
        link["ifname"]
        for link in links
        if link["ifname"].startswith(f"bw{pid}-")
        or link.get("ifalias") == f"beeweb-netns pid={pid}"
    ]
    return found


# --- without root: the forwarder and URL rewriting ----------------------------------------------


def echo_server() -> socket.socket:
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=echo, args=(conn,), daemon=True).start()

    def echo(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    return server


def test_forwarder_many_concurrent_connections_and_half_close():
    server = echo_server()
    with TcpForwarder(("127.0.0.1", 0), server.getsockname()) as forwarder:
        payload = os.urandom(256 * 1024)
        errors: list[str] = []
        clients = [socket.create_connection(forwarder.listen, timeout=10) for _ in range(100)]

        def talk(sock: socket.socket) -> None:
            try:
                sock.sendall(payload)
                sock.shutdown(socket.SHUT_WR)  # half-close: the echo must still come back
                received = bytearray()
                while data := sock.recv(65536):
                    received += data
                if bytes(received) != payload:
                    errors.append(f"got {len(received)} of {len(payload)} bytes")
            except OSError as exc:
                errors.append(repr(exc))
            finally:
                sock.close()

        threads = [threading.Thread(target=talk, args=(c,)) for c in clients]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert errors == []
        assert forwarder.accepted == 100
    server.close()


def test_forwarder_stop_ends_open_connections():
    server = echo_server()
    forwarder = TcpForwarder(("127.0.0.1", 0), server.getsockname()).start()
    client = socket.create_connection(forwarder.listen, timeout=5)
    client.sendall(b"hello")
    assert client.recv(5) == b"hello"
    deadline = time.monotonic() + 5
    while forwarder.active != 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert forwarder.active == 1
    forwarder.stop()
    assert client.recv(5) == b""  # closed by the forwarder, not left hanging
    assert forwarder.active == 0
    with pytest.raises(OSError):
        socket.create_connection(forwarder.listen, timeout=1)
    client.close()
    server.close()


def test_forwarder_refused_upstream_closes_the_client():
    unused = socket.create_server(("127.0.0.1", 0))
    target = unused.getsockname()
    unused.close()
    with TcpForwarder(("127.0.0.1", 0), target) as forwarder:
        client = socket.create_connection(forwarder.listen, timeout=5)
        assert client.recv(1) == b""
        client.close()


def test_via_gateway_rewrites_loopback_urls_only():
    lab = NetnsLab(n=1)
    lab.gateway = "10.231.7.1"
    assert (
        lab.via_gateway("postgres://beeweb:pw@127.0.0.1:5432/beeweb?sslmode=disable")
        == "postgres://beeweb:pw@10.231.7.1:5432/beeweb?sslmode=disable"
    )
    assert lab.via_gateway("redis://localhost:6379/0") == "redis://10.231.7.1:6379/0"
    assert lab.via_gateway("redis://cache.example:6379/0") == "redis://cache.example:6379/0"


def test_available_explains_why_not(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert NetnsLab._check() == (False, "network namespaces need root (run the tests as root)")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    ok, reason = NetnsLab._check()
    assert not ok and "apt-get install iproute2" in reason


# --- as root: a real lab -------------------------------------------------------------------------


def test_lab_layout(netns_lab):
    nodes = netns_lab.nodes
    assert [n.name for n in nodes] == ["node1", "node2", "node3"]
    assert all(isinstance(n, LabNode) for n in nodes)
    assert netns_lab.gateway.startswith("10.231.") and netns_lab.gateway.endswith(".1")
    prefix = netns_lab.gateway.rsplit(".", 1)[0]
    assert [n.address for n in nodes] == [f"{prefix}.11", f"{prefix}.12", f"{prefix}.13"]
    assert netns_lab.bridge == f"bwbr{os.getpid() % 10000}"
    assert [n.netns for n in nodes] == [f"bw{os.getpid()}-n{i}" for i in (1, 2, 3)]
    out = netns_lab.run(nodes[0], ["ip", "-o", "link", "show", "lo"]).stdout
    assert "UP" in out


def test_tcp_between_nodes_and_to_the_gateway(netns_lab):
    node1, node2, node3 = netns_lab.nodes
    connect = (
        "import socket, sys; "
        "socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()"
    )
    for source, target_address, server_ns in [
        (node1, node2.address, node2.netns),
        (node3, node1.address, node1.netns),
        (node2, netns_lab.gateway, None),
    ]:
        if server_ns:
            server = in_netns(server_ns, socket.create_server, (target_address, 0))
        else:
            server = socket.create_server((target_address, 0))
        with server:
            port = server.getsockname()[1]
            netns_lab.run(source, [sys.executable, "-c", connect, target_address, str(port)])
            server.settimeout(5)
            conn, (peer, _) = server.accept()
            conn.close()
            assert peer == source.address


def test_loopback_services_are_not_reachable_without_the_forwarder(netns_lab):
    # Inside a node, 127.0.0.1 is the node's own loopback: nothing listens there.
    with pytest.raises(OSError):
        netns_lab.connect(netns_lab.nodes[0], "127.0.0.1", 6379, timeout=2)


def test_redis_through_the_forwarder(netns_lab):
    need_service(6379, "Redis")
    node = netns_lab.nodes[1]
    with netns_lab.connect(node, netns_lab.gateway, 6379) as sock:
        sock.sendall(b"PING\r\n")
        assert sock.recv(64) == b"+PONG\r\n"
    if shutil.which("redis-cli"):
        out = netns_lab.run(node, ["redis-cli", "-h", netns_lab.gateway, "ping"]).stdout
        assert out.strip() == "PONG"


def test_many_concurrent_connections_from_a_node(netns_lab):
    need_service(6379, "Redis")
    node = netns_lab.nodes[2]
    socks = [netns_lab.connect(node, netns_lab.gateway, 6379) for _ in range(60)]
    try:
        for sock in socks:
            sock.sendall(b"PING\r\n")
        assert all(sock.recv(64) == b"+PONG\r\n" for sock in socks)
    finally:
        for sock in socks:
            sock.close()


def test_postgresql_through_the_forwarder(netns_lab):
    need_service(5432, "PostgreSQL")
    if not shutil.which("psql"):
        pytest.skip("psql is not installed (apt-get install postgresql-client)")
    proc = netns_lab.run(
        netns_lab.nodes[0],
        ["psql", "-h", netns_lab.gateway, "-U", "postgres", "-tAc", "select 1"],
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "1"


def test_worker_client_libraries_through_the_gateway(netns_lab):
    """psycopg and redis-py, as a Celery worker in a node uses them, with rewritten URLs."""
    need_service(5432, "PostgreSQL")
    need_service(6379, "Redis")
    code = (
        "import os, psycopg, redis; "
        "print(psycopg.connect(os.environ['DATABASE_URL']).execute('select 41 + 1')"
        ".fetchone()[0]); "
        "print(redis.Redis.from_url(os.environ['CELERY_BROKER_URL']).ping())"
    )
    env = dict(
        os.environ,
        DATABASE_URL=netns_lab.via_gateway("postgresql://postgres@127.0.0.1:5432/postgres"),
        CELERY_BROKER_URL=netns_lab.via_gateway("redis://127.0.0.1:6379/0"),
    )
    assert netns_lab.gateway in env["DATABASE_URL"]
    proc = netns_lab.run(netns_lab.nodes[1], [sys.executable, "-c", code], env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["42", "True"]


def test_qperf_between_two_nodes(netns_lab):
    if not shutil.which("qperf"):
        pytest.skip("qperf is not installed (apt-get install qperf)")
    node1, node2 = netns_lab.nodes[:2]
    server = netns_lab.popen(node2, ["qperf"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                netns_lab.connect(node1, node2.address, QPERF_PORT, timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "qperf server never listened"
                time.sleep(0.1)
        proc = netns_lab.run(
            node1, ["qperf", node2.address, "-t", "1", "tcp_bw", "tcp_lat"], check=False, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
        assert "tcp_bw:" in proc.stdout and "tcp_lat:" in proc.stdout
        assert "bw" in proc.stdout and "latency" in proc.stdout
    finally:
        netns_lab.kill(server)
    assert server.poll() is not None


def test_a_node_can_have_its_own_hostname(netns_lab):
    node = netns_lab.nodes[2]
    out = netns_lab.run(
        node,
        [sys.executable, "-c", "import socket; print(socket.gethostname())"],
        hostname=node.hostname,
    ).stdout
    assert out.strip() == "node3"
    assert socket.gethostname() != "node3"  # the root namespace keeps its own


def test_popen_runs_in_a_new_session_killed_as_a_group(netns_lab):
    proc = netns_lab.popen(netns_lab.nodes[0], ["sleep", "300"])
    assert os.getsid(proc.pid) == proc.pid
    netns_lab.kill(proc, timeout=2)
    assert proc.returncode == -signal.SIGTERM


# --- teardown, in child processes (one lab per process) ------------------------------------------

LAB_SCRIPT = """
import os, sys, time
sys.path.insert(0, {root!r})
from tests.labs.netns import NetnsLab
lab = NetnsLab(n=2).start()
lab.forward([6379])
print(os.getpid(), lab.bridge, lab.gateway, flush=True)
if sys.argv[1] == "crash":
    time.sleep(300)
lab.stop()
"""


def start_lab_process(mode: str) -> tuple[subprocess.Popen, int, str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", LAB_SCRIPT.format(root=str(ROOT)), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    line = proc.stdout.readline()
    assert line, proc.stderr.read()
    pid, bridge, _gateway = line.split()
    return proc, int(pid), bridge


def test_teardown_leaves_nothing_behind(netns_available):
    proc, pid, _bridge = start_lab_process("clean")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert lab_leftovers(pid) == []


def test_leftovers_of_a_crashed_lab_are_removed_once_its_pid_is_dead(netns_available):
    proc, pid, bridge = start_lab_process("crash")
    try:
        assert set(lab_leftovers(pid)) >= {f"bw{pid}-n1", f"bw{pid}-n2", bridge}
        # Alive: somebody else's lab, never touched.
        NetnsLab.cleanup_stale()
        assert bridge in lab_leftovers(pid)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # a crash: no teardown runs
        proc.communicate(timeout=10)
    assert lab_leftovers(pid) != []
    removed = NetnsLab.cleanup_stale()
    assert {f"bw{pid}-n1", f"bw{pid}-n2", bridge} <= set(removed)
    assert lab_leftovers(pid) == []


COLLISION_SCRIPT = """
import os, sys
sys.path.insert(0, {root!r})
from tests.labs.netns import LabError, NetnsLab
lab = NetnsLab(n=1)
lab.bridge = sys.argv[1]  # as if pid % 10000 matched another lab's
try:
    lab.start()
except LabError as exc:
    print(os.getpid(), exc)
"""


def test_a_bridge_name_collision_leaves_the_other_bridge_alone(netns_available):
    foreign = f"bwbr9{os.getpid() % 1000}x"
    subprocess.run(["ip", "link", "add", foreign, "type", "bridge"], check=True)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", COLLISION_SCRIPT.format(root=str(ROOT)), foreign],
            capture_output=True,
            text=True,
            timeout=60,
        )
        pid, message = proc.stdout.split(" ", 1)
        assert f"bridge {foreign} exists already" in message
        links = subprocess.run(
            ["ip", "-o", "link", "show", foreign], capture_output=True, text=True
        )
        assert links.returncode == 0  # still there
        assert lab_leftovers(int(pid)) == []
    finally:
        subprocess.run(["ip", "link", "del", foreign], check=False)
