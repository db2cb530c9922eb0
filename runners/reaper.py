"""The reaper: one small process per worker that starts the benchmark tools, so that no tool
ever outlives its worker. Standard library only.

``python -I -S runners/reaper.py --serve`` reads requests on its standard input, a socket
whose other end only the worker holds. For each request it starts the tool (argv list, no
shell) as the leader of a new session and process group, its output in the run's log file,
and reports its pid; when a tool exits it reports its exit code. When the worker dies, by
any means (SIGKILL and the OOM killer included), the kernel closes the worker's end of the
socket: the reaper reads end-of-file, stops every process group it started (SIGTERM, then
SIGKILL after a grace period) and exits. A tool that forks (fio's job processes, mpirun's
ranks) is covered, since its children stay in its group. When the worker started it from
its main thread, ``PR_SET_PDEATHSIG`` signals the same.

Why one process per worker and not one per run: a Python shim per run (what earlier versions
did) costs ~10 ms of interpreter start-up per run, more than a short benchmark runs; the
reaper starts once, and a run costs two messages on a local socket (``Reaper.spawn`` and the
exit report ``Reaper.wait`` reads).

Protocol, one JSON object per line: ``{"argv": [...], "cwd": ..., "env": {...}, "log": ...}``
-> ``{"spawned": pid}`` or ``{"spawned": null, "error": "could not start …"}``; later
``{"exit": pid, "code": exit code}`` (negative: killed by that signal).
"""

from __future__ import annotations

import os
import select
import sys
import time

# The C ``_signal`` module rather than ``signal``, whose enum wrappers cost a few
# milliseconds of start-up. Same functions and integer constants.
try:
    import _signal as signal
except ImportError:  # pragma: no cover - other Python implementations
    import signal

GRACE_SECONDS = 5.0
PR_SET_PDEATHSIG = 1
# Without pidfds (Linux < 5.3) the reaper looks for exited tools this often.
POLL_SECONDS = 0.02


# --- The reaper process ---------------------------------------------------------------------


def _which(name: str, path: str) -> str:
    """``name`` found on ``path`` (the tool's own PATH) as an executable file."""
    if "/" in name:
        return name
    for directory in path.split(os.pathsep):
        candidate = os.path.join(directory or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError(2, "No such file or directory", name)


def _spawn(request: dict) -> int:
    """Start one tool as the leader of a new session, stdin from /dev/null and stdout and
    stderr into its log file; its pid. OSError when it cannot start."""
    argv, env = request["argv"], request["env"]
    path = _which(argv[0], env.get("PATH", os.defpath))
    out = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
    try:
        null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        try:
            # posix_spawn has no working-directory action in Python: the reaper is
            # single-threaded, so changing its own directory around the spawn is safe.
            os.chdir(request["cwd"] or "/")
            try:
                return os.posix_spawn(
                    path,
                    argv,
                    env,
                    file_actions=[
                        (os.POSIX_SPAWN_DUP2, null, 0),
                        (os.POSIX_SPAWN_DUP2, out, 1),
                        (os.POSIX_SPAWN_DUP2, out, 2),
                    ],
                    setsid=True,
                    # What Popen's restore_signals does: Python ignores these, a tool must not.
                    setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
                )
            finally:
                os.chdir("/")
        finally:
            os.close(null)
    finally:
        os.close(out)


def _stop_all(children: dict[int, int | None]) -> None:
    """Stop every process group started (the worker is gone): SIGTERM, then SIGKILL to
    whatever is left after GRACE_SECONDS."""
    # The worker's end-of-file and its death signal both come: the second must not
    # interrupt this.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for pid in children:
        try:
            os.killpg(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + GRACE_SECONDS
    pending = set(children)
    while pending and time.monotonic() < deadline:
        for pid in list(pending):
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    pending.discard(pid)
            except ChildProcessError:
                pending.discard(pid)
        time.sleep(0.05)
    for pid in children:  # the leader may be gone while its children linger
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass


def serve(fd: int = 0, arm_pdeathsig: bool = False) -> int:
    """The reaper's loop: requests on ``fd``, replies on the same socket."""
    import json

    if arm_pdeathsig:
        try:
            import ctypes

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        except OSError:
            pass
    children: dict[int, int | None] = {}  # pid -> its pidfd (None: polled)

    def on_signal(signum, frame):
        _hold_signals()  # a second signal must not interrupt the stop
        raise _Stop

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def send(message: dict) -> None:
        data = (json.dumps(message) + "\n").encode()
        try:
            while data:
                data = data[os.write(fd, data) :]
        except OSError:
            pass  # the worker is gone: end-of-file on the next read says so

    try:
        _loop(fd, children, send)
    except _Stop:
        pass
    _stop_all(children)
    return 0


def _hold_signals() -> None:
    """Block SIGTERM and SIGINT in this process from now on (they stay pending: the reaper
    is stopping its tools and exits)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})


class _Stop(Exception):
    """SIGTERM or SIGINT (the worker's death signal): stop every tool and exit."""


def _loop(fd: int, children: dict[int, int | None], send) -> None:
    import json

    buffer = b""
    while True:
        fds = [fd, *(pidfd for pidfd in children.values() if pidfd is not None)]
        polled = any(pidfd is None for pidfd in children.values())
        try:
            ready = select.select(fds, [], [], POLL_SECONDS if polled else None)[0]
        except InterruptedError:
            continue
        if fd in ready:
            try:
                data = os.read(fd, 1 << 20)
            except OSError:
                data = b""
            if not data:
                # The worker died (or closed the reaper). Its death signal may come too:
                # from here on it must not interrupt the stop (a signal raising _Stop
                # between this return and _stop_all would end the reaper with its tools
                # still running).
                _hold_signals()
                return
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                try:
                    pid = _spawn(json.loads(line))
                except OSError as exc:
                    send({"spawned": None, "error": f"could not start {_name(line)}: {exc}"})
                    continue
                try:
                    children[pid] = os.pidfd_open(pid)
                except (AttributeError, OSError):
                    children[pid] = None
                send({"spawned": pid})
        for pid, pidfd in list(children.items()):
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done, status = pid, 255 << 8
            if not done:
                continue
            if pidfd is not None:
                os.close(pidfd)
            del children[pid]
            send({"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def _name(line: bytes) -> str:
    import json

    try:
        return str(json.loads(line)["argv"][0])
    except (ValueError, KeyError, IndexError, TypeError):
        return "the tool"


# --- The worker's side ----------------------------------------------------------------------


class SpawnError(OSError):
    """The tool could not be started (not found, not executable, no working directory)."""


class ReaperGone(RuntimeError):
    """The reaper process ended while a tool ran (killed from outside)."""


class Reaper:
    """The worker's handle on its reaper process (``reaper()``): start tools, wait for them.
    Safe to share between threads: one of them at a time reads the socket, and exit reports
    for another thread's tool are kept for it."""

    def __init__(self) -> None:
        import socket
        import subprocess
        import threading

        ours, theirs = socket.socketpair()
        main = threading.current_thread() is threading.main_thread()
        # Its own session: a signal to the worker's process group (a terminal's Ctrl-C, a
        # supervisor's SIGTERM for a warm shutdown) does not stop the running tool.
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", os.path.abspath(__file__), "--serve"]
            + (["--pdeathsig"] if main else []),
            stdin=theirs,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        theirs.close()
        self.sock = ours
        self.owner = os.getpid()
        self.lock = threading.Lock()
        self.buffer = b""
        self.exits: dict[int, int] = {}
        self.replies: list[dict] = []
        self.gone = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return not self.gone and self.owner == os.getpid() and self.proc.poll() is None

    def _pump(self, timeout: float) -> None:
        """Read what the reaper sent within ``timeout`` seconds (caller holds the lock)."""
        import json

        ready = select.select([self.sock], [], [], max(timeout, 0))[0]
        if not ready:
            return
        try:
            data = self.sock.recv(1 << 16)
        except OSError:
            data = b""
        if not data:
            self.gone = True
            raise ReaperGone("the reaper process ended")
        self.buffer += data
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            message = json.loads(line)
            if "exit" in message:
                self.exits[message["exit"]] = message["code"]
            else:
                self.replies.append(message)

    def spawn(self, argv: list[str], cwd: str, env: dict[str, str], log: str) -> int:
        """Start ``argv`` in ``cwd`` with exactly ``env``, output into ``log``; its pid (also
        its process group's id). SpawnError when it cannot start."""
        import json

        request = json.dumps({"argv": list(argv), "cwd": str(cwd), "env": env, "log": str(log)})
        with self.lock:
            self.sock.sendall(request.encode() + b"\n")
            while not self.replies:
                self._pump(1.0)
            reply = self.replies.pop(0)
        if reply.get("spawned") is None:
            raise SpawnError(reply.get("error") or f"could not start {argv[0]}")
        return int(reply["spawned"])

    def wait(self, pid: int, timeout: float | None = None) -> int | None:
        """The exit code of tool ``pid`` (negative: the signal that ended it) once it has
        exited, waiting up to ``timeout`` seconds (None: for ever); None when it still runs.
        Wakes the moment the reaper reports the exit."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self.lock:
                if pid in self.exits:
                    return self.exits.pop(pid)
                remaining = 0.1 if deadline is None else deadline - time.monotonic()
                if remaining <= 0:
                    return None
                # In slices: another thread's tool may be waited for on the same socket.
                self._pump(min(remaining, 0.1))

    def close(self) -> None:
        """Stop the reaper (its tools' groups are stopped as when the worker dies)."""
        self.gone = True
        self.sock.close()
        self.proc.wait()


_reaper: Reaper | None = None


def reaper() -> Reaper:
    """This worker process's reaper, started on first use (and again if it ended)."""
    global _reaper
    if _reaper is None or not _reaper.alive():
        _reaper = Reaper()
    return _reaper


if __name__ == "__main__":
    if sys.argv[1:2] != ["--serve"]:
        print("usage: python -I -S runners/reaper.py --serve [--pdeathsig]", file=sys.stderr)
        sys.exit(2)
    sys.exit(serve(0, arm_pdeathsig="--pdeathsig" in sys.argv[2:]))
