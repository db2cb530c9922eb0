"""A network-namespace lab: N "nodes" on this machine, so multi-node tests run on one host.

Each node is a network namespace with a veth pair into one Linux bridge in the root namespace::

    root namespace:  bwbr<pid%10000>  10.231.X.1/24   (the gateway)
    node1:           bw<pid>-n1 eth0  10.231.X.11/24
    node2:           bw<pid>-n2 eth0  10.231.X.12/24  ...

PostgreSQL and Redis listen on loopback only, which a namespace cannot reach, so the lab runs an
in-process TCP forwarder on ``<gateway>:<port>`` to ``127.0.0.1:<port>``; a worker in a node then
uses ``DATABASE_URL=postgres://beeweb@<gateway>:5432/...`` (see :meth:`NetnsLab.via_gateway`).

Names carry the creating pid so a CI run and a developer run coexist, and :meth:`start` removes
what a crashed earlier run left behind, but only when the pid that created it is dead. Needs root
and iproute2; :meth:`NetnsLab.available` says why a machine cannot.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import fcntl
import ipaddress
import json
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

SUBNET_BASE = "10.231"
NODE_HOST_OFFSET = 10  # node i gets .1<i>: 10.231.X.11, .12, ...
LOCK_FILE = Path("/run/beeweb-netns.lock")
ALIAS_PREFIX = "beeweb-netns pid="
CLONE_NEWNET = 0x40000000
NETNS_DIRS = (Path("/run/netns"), Path("/var/run/netns"))

# Stale-resource patterns; the pid in the name (or in the bridge's alias) is the creator's.
NS_RE = re.compile(r"^bw(\d+)-n\d+$")
VETH_RE = re.compile(r"^bw(\d+)-v\d+$")
BRIDGE_RE = re.compile(r"^bwbr\d+$")

# Runs inside a fresh UTS namespace: set the node's hostname, then become the real command.
HOSTNAME_TRAMPOLINE = (
    "import os, socket, sys; socket.sethostname(sys.argv[1]); os.execvp(sys.argv[2], sys.argv[2:])"
)


class LabError(RuntimeError):
    """The lab could not be built, checked or torn down."""


@dataclass(frozen=True)
class LabNode:
    """One simulated machine: its name, network namespace and address on the lab bridge."""

    name: str
    netns: str
    address: str

    @property
    def hostname(self) -> str:
        """The hostname a process started with ``popen(..., hostname=node.hostname)`` sees."""
        return self.name


# --- small helpers ------------------------------------------------------------------------------


def _run(argv: Sequence[str], *, check: bool = True, timeout: float = 30) -> str:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise LabError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def _ip(*args: str, check: bool = True) -> str:
    return _run(["ip", *args], check=check)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def _netns_names() -> list[str]:
    # "bw123-n1 (id: 0)" or just "bw123-n1" when the namespace has no id yet.
    return [line.split()[0] for line in _ip("netns", "list").splitlines() if line.strip()]


def _links() -> list[dict]:
    return json.loads(_ip("-j", "link", "show") or "[]")


def _netns_path(netns: str) -> Path:
    for base in NETNS_DIRS:
        if (base / netns).exists():
            return base / netns
    raise LabError(f"network namespace {netns!r} does not exist")


_libc = None


def _setns(fd: int) -> None:
    global _libc
    if hasattr(os, "setns"):  # Python >= 3.12
        os.setns(fd, CLONE_NEWNET)
        return
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def in_netns(netns: str, fn, *args, **kwargs):
    """Call ``fn`` in a throwaway thread that has joined ``netns``; return its result.

    A network namespace is per thread, so the caller's threads stay where they are; sockets
    created by ``fn`` keep living in ``netns`` after the thread ends.
    """
    path = _netns_path(netns)
    outcome: dict = {}

    def target() -> None:
        try:
            with open(path, "rb") as handle:
                _setns(handle.fileno())
            outcome["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the caller below
            outcome["error"] = exc

    thread = threading.Thread(target=target, name=f"in-netns-{netns}", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


# --- the TCP forwarder --------------------------------------------------------------------------


class TcpForwarder:
    """Forward every connection to ``listen`` to ``target``, byte for byte, in threads.

    One accept thread; per connection one thread per direction, so many concurrent connections
    (a Celery worker's pool, Django's connections) work, and a protocol like PostgreSQL's needs no
    special handling. Half-closes are passed on; :meth:`stop` ends open connections too.
    """

    def __init__(
        self,
        listen: tuple[str, int],
        target: tuple[str, int],
        *,
        backlog: int = 512,
        connect_timeout: float = 10.0,
    ) -> None:
        self.listen = listen
        self.target = target
        self.backlog = backlog
        self.connect_timeout = connect_timeout
        self.accepted = 0
        self._conns: set[tuple[socket.socket, socket.socket | None]] = set()
        self._threads: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: socket.socket | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._acceptor: threading.Thread | None = None

    def __repr__(self) -> str:
        return (
            f"TcpForwarder({self.listen[0]}:{self.listen[1]} -> {self.target[0]}:{self.target[1]})"
        )

    @property
    def active(self) -> int:
        """Connections open right now."""
        with self._lock:
            return len(self._conns)

    def start(self) -> TcpForwarder:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            server.bind(self.listen)
        except OSError as exc:
            server.close()
            raise LabError(f"{self!r}: cannot listen: {exc}") from exc
        server.listen(self.backlog)
        server.setblocking(False)
        self._server = server
        # Writing to this pair wakes the accept loop at once on stop().
        self._wake_r, self._wake_w = socket.socketpair()
        self.listen = server.getsockname()[:2]  # port 0 means "any": report the real one
        self._acceptor = threading.Thread(
            target=self._accept_loop, daemon=True, name=f"forward-{self.listen[1]}"
        )
        self._acceptor.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        if self._server is None or self._stopping.is_set():
            return
        self._stopping.set()
        with contextlib.suppress(OSError, AttributeError):
            self._wake_w.send(b"x")
        if self._acceptor is not None:
            self._acceptor.join(timeout)
        with self._lock:
            conns = list(self._conns)
            threads = list(self._threads)
        for client, upstream in conns:
            for sock in (client, upstream):
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._server.close()
        for sock in (self._wake_r, self._wake_w):
            if sock is not None:
                sock.close()

    def __enter__(self) -> TcpForwarder:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _spawn(self, target, *args) -> None:
        thread = threading.Thread(target=self._tracked, args=(target, *args), daemon=True)
        with self._lock:
            self._threads.add(thread)
        thread.start()

    def _tracked(self, target, *args) -> None:
        try:
            target(*args)
        finally:
            with self._lock:
                self._threads.discard(threading.current_thread())

    def _accept_loop(self) -> None:
        assert self._server is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self._server, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while not self._stopping.is_set():
                for key, _ in selector.select():
                    if key.fileobj is self._wake_r:
                        return
                    try:
                        client, _addr = self._server.accept()
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        return
                    self.accepted += 1
                    client.setblocking(True)
                    self._spawn(self._handle, client)

    def _handle(self, client: socket.socket) -> None:
        # Connecting here, not in the accept loop, keeps a slow upstream from stalling accepts.
        entry: tuple[socket.socket, socket.socket | None] = (client, None)
        with self._lock:
            self._conns.add(entry)
        upstream = None
        try:
            if self._stopping.is_set():
                return
            try:
                upstream = socket.create_connection(self.target, timeout=self.connect_timeout)
            except OSError:
                return
            upstream.settimeout(None)
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._conns.discard(entry)
                entry = (client, upstream)
                self._conns.add(entry)
            if self._stopping.is_set():
                return
            back = threading.Thread(target=self._pump, args=(upstream, client), daemon=True)
            back.start()
            self._pump(client, upstream)
            back.join()
        finally:
            with self._lock:
                self._conns.discard(entry)
            for sock in (client, upstream):
                if sock is not None:
                    sock.close()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    # Clean EOF: pass the half-close on, the other direction may still talk.
                    with contextlib.suppress(OSError):
                        dst.shutdown(socket.SHUT_WR)
                    return
                dst.sendall(data)
        except OSError:
            # Reset or shut down by stop(): end both directions.
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


# --- the lab ------------------------------------------------------------------------------------


class NetnsLab:
    """N nodes (network namespaces) behind one bridge, plus forwarders to root's loopback.

    ``with NetnsLab(n=3) as lab: lab.forward([5432, 6379]); lab.popen(lab.nodes[0], argv)``.
    One lab per process at a time: the names derive from the pid.
    """

    _active: NetnsLab | None = None
    _probe: tuple[bool, str] | None = None

    def __init__(self, n: int = 3) -> None:
        if not 1 <= n <= 200:
            raise ValueError("a lab has 1 to 200 nodes")
        self.n = n
        self.pid = os.getpid()
        self.bridge = f"bwbr{self.pid % 10000}"
        self.subnet: ipaddress.IPv4Network | None = None
        self.gateway = ""
        self.nodes: list[LabNode] = []
        self.forwarders: list[TcpForwarder] = []
        self._procs: list[subprocess.Popen] = []
        self._started = False
        self._bridge_created = False  # never delete a bridge of the same name we did not make

    def __repr__(self) -> str:
        return f"NetnsLab(bridge={self.bridge}, subnet={self.subnet}, nodes={len(self.nodes)})"

    # availability -------------------------------------------------------------------------------

    @classmethod
    def available(cls) -> tuple[bool, str]:
        """Whether this machine can build a lab, and if not, why (probed once per process)."""
        if cls._probe is None:
            cls._probe = cls._check()
        return cls._probe

    @staticmethod
    def _check() -> tuple[bool, str]:
        if sys.platform != "linux":
            return False, f"network namespaces need Linux, this is {sys.platform}"
        if os.geteuid() != 0:
            return False, "network namespaces need root (run the tests as root)"
        if shutil.which("ip") is None:
            return False, "the ip command is missing: apt-get install iproute2"
        probe = f"bw{os.getpid()}-n999"
        bridge = f"bwbrp{os.getpid() % 10000}"
        try:
            _ip("netns", "add", probe)
        except (LabError, OSError) as exc:
            return False, f"cannot create a network namespace: {exc}"
        try:
            _ip("netns", "del", probe)
            _ip("link", "add", bridge, "type", "bridge")
            _ip("link", "del", bridge)
        except (LabError, OSError) as exc:
            _ip("link", "del", bridge, check=False)
            return False, f"cannot create a Linux bridge: {exc}"
        return True, "ok"

    # lifecycle ----------------------------------------------------------------------------------

    def start(self) -> NetnsLab:
        """Build bridge, namespaces and veths, then check node→node and node→gateway traffic."""
        if self._started:
            return self
        if NetnsLab._active is not None:
            raise LabError(f"{NetnsLab._active!r} is still running in this process; stop it first")
        NetnsLab._active = self
        self._started = True
        try:
            self.cleanup_stale()
            self._create()
            self.verify()
        except BaseException:
            self.stop()
            raise
        return self

    def _create(self) -> None:
        # The lock makes "find a free /24, put it on our bridge" atomic across processes.
        LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
        with open(LOCK_FILE, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            owner = next(
                (link.get("ifalias", "") for link in _links() if link.get("ifname") == self.bridge),
                None,
            )
            if owner is not None:
                # pid % 10000 collides with a live process's lab (or a foreign bridge).
                raise LabError(f"bridge {self.bridge} exists already ({owner or 'no alias'})")
            self.subnet = self._free_subnet()
            hosts = list(self.subnet.hosts())
            self.gateway = str(hosts[0])
            _ip("link", "add", self.bridge, "type", "bridge")
            self._bridge_created = True
            _ip("link", "set", "dev", self.bridge, "alias", f"{ALIAS_PREFIX}{self.pid}")
            _ip("addr", "add", f"{self.gateway}/{self.subnet.prefixlen}", "dev", self.bridge)
            _ip("link", "set", "dev", self.bridge, "up")
        for i in range(1, self.n + 1):
            netns = f"bw{self.pid}-n{i}"
            veth = f"bw{self.pid}-v{i}"
            address = str(hosts[NODE_HOST_OFFSET + i - 1])
            _ip("netns", "add", netns)
            self.nodes.append(LabNode(f"node{i}", netns, address))
            _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns)
            _ip("link", "set", "dev", veth, "master", self.bridge, "up")
            _ip("-n", netns, "link", "set", "dev", "lo", "up")
            _ip("-n", netns, "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", "eth0")
            _ip("-n", netns, "link", "set", "dev", "eth0", "up")
            _ip("-n", netns, "route", "add", "default", "via", self.gateway)

    def _free_subnet(self) -> ipaddress.IPv4Network:
        used = []
        for line in _ip("-o", "-4", "addr", "show").splitlines():
            match = re.search(r"\binet (\S+)", line)
            if match:
                used.append(ipaddress.ip_interface(match.group(1)).network)
        for line in _ip("-4", "route", "show", "table", "all").splitlines():
            # "local …", "broadcast …", "default …" lines fail to parse and are skipped.
            dest = line.split()[0] if line.split() else ""
            with contextlib.suppress(ValueError):
                network = ipaddress.ip_network(dest, strict=False)
                # A wide route (a VPN's 10.0.0.0/8, say) loses to our more specific /24.
                if network.prefixlen >= 16:
                    used.append(network)
        start = self.pid % 256
        for k in range(256):
            candidate = ipaddress.ip_network(f"{SUBNET_BASE}.{(start + k) % 256}.0/24")
            if not any(candidate.overlaps(net) for net in used):
                return candidate
        raise LabError(f"no free /24 left in {SUBNET_BASE}.0.0/16")

    def verify(self, timeout: float = 5.0) -> None:
        """Open TCP connections node→gateway and node→next node; raise LabError if one fails."""
        gateway_server = socket.create_server((self.gateway, 0))
        servers = {
            node.netns: in_netns(node.netns, socket.create_server, (node.address, 0))
            for node in self.nodes
        }
        try:
            pairs = [
                (node, (self.gateway, gateway_server.getsockname()[1]), gateway_server)
                for node in self.nodes
            ]
            if len(self.nodes) > 1:
                for i, node in enumerate(self.nodes):
                    peer = self.nodes[(i + 1) % len(self.nodes)]
                    server = servers[peer.netns]
                    pairs.append((node, (peer.address, server.getsockname()[1]), server))
            for node, address, server in pairs:
                try:
                    client = self.connect(node, *address, timeout=timeout)
                except OSError as exc:
                    raise LabError(self._blocked_hint(node, address, exc)) from exc
                server.settimeout(timeout)
                conn, _ = server.accept()
                conn.close()
                client.close()
        finally:
            gateway_server.close()
            for server in servers.values():
                server.close()

    def _blocked_hint(self, node: LabNode, address: tuple[str, int], exc: OSError) -> str:
        message = f"{node.name} ({node.netns}) cannot reach {address[0]}:{address[1]}: {exc}"
        nf = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
        if nf.exists() and nf.read_text().strip() == "1":
            # Docker hosts drop bridged traffic in iptables FORWARD when br_netfilter is on.
            message += (
                f"; bridged traffic passes iptables (net.bridge.bridge-nf-call-iptables=1)"
                f": allow it with `iptables -I FORWARD -i {self.bridge} -o {self.bridge} "
                "-j ACCEPT` or `sysctl net.bridge.bridge-nf-call-iptables=0`"
            )
        return message

    def stop(self) -> None:
        """Kill the lab's processes, stop forwarders, delete namespaces and bridge. Idempotent."""
        if not self._started:
            return
        for proc in self._procs:
            self.kill(proc)
        self._procs.clear()
        for forwarder in self.forwarders:
            forwarder.stop()
        self.forwarders.clear()
        existing = set(_netns_names()) if shutil.which("ip") else set()
        for i in range(1, self.n + 1):
            netns = f"bw{self.pid}-n{i}"
            if netns not in existing:
                continue
            # Anything still running inside (a daemonised server, say) would keep it alive.
            for pid in _ip("netns", "pids", netns, check=False).split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            _ip("netns", "del", netns, check=False)
            _ip("link", "del", f"bw{self.pid}-v{i}", check=False)
        if self._bridge_created and any(link.get("ifname") == self.bridge for link in _links()):
            _ip("link", "del", self.bridge)
        self._bridge_created = False
        self.nodes = []
        if NetnsLab._active is self:
            NetnsLab._active = None
        self._started = False

    def __enter__(self) -> NetnsLab:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @classmethod
    def cleanup_stale(cls) -> list[str]:
        """Remove namespaces, veths and bridges of earlier labs whose creating process is dead.

        Our own pid counts as dead when no lab of this process is running (a lab that was never
        stopped). Processes still inside a stale namespace are left alone: they were not ours.
        """
        own = os.getpid()

        def stale(pid: int) -> bool:
            if pid == own:
                return cls._active is None or not cls._active.nodes
            return not _pid_alive(pid)

        removed = []
        for netns in _netns_names():
            match = NS_RE.match(netns)
            if match and stale(int(match.group(1))):
                _ip("netns", "del", netns, check=False)
                removed.append(netns)
        for link in _links():
            name = link.get("ifname", "")
            match = VETH_RE.match(name)
            alias = link.get("ifalias", "")
            if match and stale(int(match.group(1))):
                _ip("link", "del", name, check=False)
                removed.append(name)
            elif BRIDGE_RE.match(name) and alias.startswith(ALIAS_PREFIX):
                with contextlib.suppress(ValueError):
                    if stale(int(alias[len(ALIAS_PREFIX) :])):
                        _ip("link", "del", name, check=False)
                        removed.append(name)
        return removed

    # using the lab ------------------------------------------------------------------------------

    def node(self, which: LabNode | str | int) -> LabNode:
        """A node by LabNode, name ("node2"), namespace name or 1-based index."""
        if isinstance(which, LabNode):
            return which
        if isinstance(which, int) and 1 <= which <= len(self.nodes):
            return self.nodes[which - 1]
        for node in self.nodes:
            if which in (node.name, node.netns):
                return node
        raise LabError(f"no node {which!r} in {self!r}")

    def forward(self, ports: Iterable[int], target_host: str = "127.0.0.1") -> list[TcpForwarder]:
        """Listen on ``<gateway>:<port>`` for each port, forwarding to ``target_host:<port>``."""
        if not self.gateway:
            raise LabError("start the lab before forwarding ports")
        started = []
        for port in ports:
            forwarder = TcpForwarder((self.gateway, port), (target_host, port)).start()
            self.forwarders.append(forwarder)
            started.append(forwarder)
        return started

    def via_gateway(self, url: str) -> str:
        """``url`` with a loopback host replaced by the gateway (for DATABASE_URL and friends)."""
        parts = urlsplit(url)
        if parts.hostname not in {"127.0.0.1", "localhost", "::1"}:
            return url
        userinfo = parts.netloc.rpartition("@")[0]
        port = f":{parts.port}" if parts.port else ""
        netloc = f"{userinfo}@{self.gateway}{port}" if userinfo else f"{self.gateway}{port}"
        return urlunsplit(parts._replace(netloc=netloc))

    def argv(
        self, node: LabNode | str | int, argv: Sequence[str], *, hostname: str | None = None
    ) -> list[str]:
        """The command line that runs ``argv`` in ``node`` (optionally with its own hostname)."""
        netns = self.node(node).netns
        if hostname is None:
            return ["ip", "netns", "exec", netns, *argv]
        return [
            "ip",
            "netns",
            "exec",
            netns,
            "unshare",
            "--uts",
            "--",
            sys.executable,
            "-c",
            HOSTNAME_TRAMPOLINE,
            hostname,
            *argv,
        ]

    def popen(
        self,
        node: LabNode | str | int,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        hostname: str | None = None,
        **popen_kwargs,
    ) -> subprocess.Popen:
        """Start ``argv`` in ``node`` in a new session; :meth:`stop` kills it if still running.

        ``hostname`` gives the process a private UTS namespace with that hostname, so e.g. a
        Celery worker reports ``node2`` rather than this machine's name.
        """
        popen_kwargs.setdefault("start_new_session", True)
        proc = subprocess.Popen(self.argv(node, argv, hostname=hostname), env=env, **popen_kwargs)
        self._procs.append(proc)
        return proc

    def run(
        self,
        node: LabNode | str | int,
        argv: Sequence[str],
        *,
        check: bool = True,
        timeout: float = 60,
        env: dict[str, str] | None = None,
        hostname: str | None = None,
        **run_kwargs,
    ) -> subprocess.CompletedProcess:
        """Run ``argv`` in ``node`` to completion; output captured as text unless told otherwise."""
        if "stdout" not in run_kwargs and "stderr" not in run_kwargs:
            run_kwargs.setdefault("capture_output", True)
        run_kwargs.setdefault("text", True)
        return subprocess.run(
            self.argv(node, argv, hostname=hostname),
            check=check,
            timeout=timeout,
            env=env,
            **run_kwargs,
        )

    @staticmethod
    def kill(proc: subprocess.Popen, timeout: float = 5.0) -> int | None:
        """SIGTERM the process group of ``proc``, SIGKILL after ``timeout``; its return code."""
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout)
        else:
            # The leader is gone; its group may not be (a worker's pool children).
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        return proc.returncode

    def connect(
        self, node: LabNode | str | int, host: str, port: int, timeout: float = 5.0
    ) -> socket.socket:
        """A TCP socket connected from inside ``node`` (no subprocess needed)."""
        return in_netns(self.node(node).netns, socket.create_connection, (host, port), timeout)


@atexit.register
def _stop_active_lab() -> None:
    # An interrupted test run still cleans up; a killed one is cleaned by the next start().
    if NetnsLab._active is not None:
        with contextlib.suppress(Exception):
            NetnsLab._active.stop()
