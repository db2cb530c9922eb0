"""Run BeeGFS StorageBench to completion: start, poll, print the verbose status, clean up.

StorageBench runs asynchronously inside the storage servers; ``beegfs-ctl --storagebench``
only starts it and reports on it. This driver turns that into one blocking command whose
stdout is the final ``--status --verbose`` report (what runners.parsers.storagebench reads)::

    python -m runners.tools.storagebench_driver --alltargets --write \
        --blocksize 512K --size 1G --threads 4 [--odirect] [--interval 5] [--timeout 3600] \
        [--keep] [--reason-file PATH]

beegfs-ctl is the node's own: the argv prefix in the environment variable BEEWEB_BEEGFS_CTL
(shlex-split; default ``beegfs-ctl``), e.g. ``/opt/beegfs/sbin/beegfs-ctl
--cfgFile=/etc/beegfs/lab-client.conf``. The worker's environment says it, never the run.

What BeeGFS 7.4.7's beegfs-ctl does, as seen against its real servers (and why the driver
reads more than exit statuses):
- a benchmark a server refuses (a read without enough written data, a second benchmark) is
  exit status 0 with "Some errors occurred:" and the server's words on stderr, and the
  status line ``Error: N``;
- a storage server that died mid-run makes ``--status`` fail (exit status 3, "Failed to
  communicate with node: …"); one that restarted answers ``Didn't run: N``: its benchmark is
  gone, and no poll would ever see it finish;
- ``--stop`` is acknowledged at once (``Stopping``, ``Stopped`` within a moment).

Progress goes to stderr. Exit status: 0 done, 1 a beegfs-ctl call or a target failed, 124
timeout (the benchmark is stopped), 143 terminated by SIGTERM/SIGINT (stopped too). On any
exit but 0 the benchmark files are removed (``--cleanup``), ``--keep`` or not, and the reason,
in BeeGFS's words, goes to ``--reason-file`` (the executor puts it in the run's error).
Standard library only; every beegfs-ctl call is an argv list, never a shell line.
"""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

from runners import beegfs_ctl

EXIT_FAILED = 1
EXIT_TIMEOUT = 124
EXIT_TERMINATED = 143

CTL_ENV = beegfs_ctl.CTL_VAR
# After --stop, how long the driver waits for "Stopped" before it cleans up anyway: the
# executor SIGKILLs what is left of the process group 5 s after its SIGTERM.
STOP_WAIT_S = 2.5
ERRORS_HEADING = "Some errors occurred:"

_STATE_RE = re.compile(
    r"^\s*(Finished|Running|Stopping|Stopped|Error|Uninitialized|Idle|Didn't run)\s*:\s*(\d+)\s*$",
    re.IGNORECASE | re.MULTILINE,
)
_SIZE_RE = re.compile(r"\d{1,18}[KMGT]?")
_IDS_RE = re.compile(r"\d{1,9}(,\d{1,9})*")
# Lines of beegfs-ctl's stderr that only point elsewhere.
_NOISE = ("For more details look into the storage server log file",)


class Terminated(Exception):
    """SIGTERM or SIGINT arrived while the benchmark ran."""


class Failed(Exception):
    """The benchmark cannot go on; the message is BeeGFS's own words (and what was called)."""


def states(text: str) -> dict[str, int]:
    """Server counts per state from ``--status`` output: {"running": 1, "finished": 2}
    (StorageBench counts storage servers, not targets; "didn't run" is a server that knows
    no benchmark: it never started one, or restarted since)."""
    counts: dict[str, int] = {}
    for name, count in _STATE_RE.findall(text):
        key = name.lower()
        counts[key] = counts.get(key, 0) + int(count)
    return counts


def is_done(counts: dict[str, int]) -> bool:
    """No server is running or stopping, and at least one has an outcome."""
    if counts.get("running", 0) or counts.get("stopping", 0):
        return False
    return any(counts.get(s, 0) for s in ("finished", "stopped", "error"))


def words(done: subprocess.CompletedProcess[str]) -> str:
    """What beegfs-ctl said, stderr first (its errors), without blank or pointer lines."""
    lines = (done.stderr + "\n" + done.stdout).splitlines()
    kept = [ln.rstrip() for ln in lines if ln.strip() and not ln.strip().startswith(_NOISE)]
    return "\n".join(kept)


def ctl_prefix(environ: dict[str, str] | None = None) -> list[str]:
    """beegfs-ctl's argv prefix on this node (``runners.beegfs_ctl``); a prefix that cannot be
    split stops the driver with the reason."""
    try:
        return beegfs_ctl.ctl_prefix(environ)
    except beegfs_ctl.CtlConfigError as exc:
        raise SystemExit(f"storagebench: {exc}") from None


def _size(text: str) -> str:
    if not _SIZE_RE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"not a size like 512K or 1G: {text!r}")
    return text


def _ids(text: str) -> str:
    if not _IDS_RE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"not a comma-separated list of target ids: {text!r}")
    return text


def _positive(kind: type) -> object:
    def convert(text: str) -> float | int:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
        return value

    return convert


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The driver's options; argparse exits with status 2 on a malformed one."""
    parser = argparse.ArgumentParser(
        prog="storagebench_driver", description=__doc__.splitlines()[0]
    )
    targets = parser.add_mutually_exclusive_group(required=True)
    targets.add_argument("--alltargets", action="store_true")
    targets.add_argument("--targetids", type=_ids)
    op = parser.add_mutually_exclusive_group(required=True)
    op.add_argument("--write", action="store_true")
    op.add_argument("--read", action="store_true")
    parser.add_argument("--blocksize", type=_size, required=True)
    parser.add_argument("--size", type=_size, required=True)
    parser.add_argument("--threads", type=_positive(int), required=True)
    parser.add_argument("--odirect", action="store_true")
    parser.add_argument("--interval", type=_positive(float), default=5.0)
    parser.add_argument("--timeout", type=_positive(float), default=3600.0)
    parser.add_argument(
        "--keep", action="store_true", help="after success, leave the files for a read"
    )
    parser.add_argument("--reason-file", help="where to write why the benchmark failed")
    return parser.parse_args(argv)


class Driver:
    """One StorageBench run driven through the node's ``beegfs-ctl``."""

    def __init__(self, args: argparse.Namespace, prefix: list[str] | None = None):
        self.args = args
        self.prefix = prefix or ctl_prefix()
        self.targets = ["--alltargets"] if args.alltargets else [f"--targetids={args.targetids}"]
        self.reason = ""

    def ctl(self, *extra: str) -> list[str]:
        """argv of one ``beegfs-ctl --storagebench`` call on the chosen targets."""
        return [*self.prefix, "--storagebench", *self.targets, *extra]

    def call(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` (no shell); a binary that cannot start or hangs is exit status 127."""
        try:
            return subprocess.run(
                argv, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return subprocess.CompletedProcess(argv, 127, "", f"{exc}\n")

    def log(self, message: str) -> None:
        print(f"storagebench: {message}", file=sys.stderr, flush=True)

    def check(self, what: str, done: subprocess.CompletedProcess[str]) -> None:
        """Failed (with BeeGFS's words) when a call failed or a server reported an error."""
        said = words(done)
        if done.returncode != 0:
            raise Failed(f"beegfs-ctl --storagebench {what} failed (exit status "
                         f"{done.returncode}): {said or 'no output'}")  # fmt: skip
        if ERRORS_HEADING in done.stderr or states(done.stdout).get("error", 0):
            raise Failed(f"beegfs-ctl --storagebench {what}: {said}")

    def start_argv(self) -> list[str]:
        a = self.args
        extra = [
            "--write" if a.write else "--read",
            f"--blocksize={a.blocksize}",
            f"--size={a.size}",
            f"--threads={a.threads}",
        ]
        if a.odirect:
            extra.append("--odirect")
        return self.ctl(*extra)

    def run(self) -> int:
        """Start, wait, report and clean up; the exit status (see the module docstring)."""
        try:
            return self._run()
        except Terminated:
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, signal.SIG_IGN)  # let the stop and cleanup finish
            self.log("terminated: stopping the benchmark")
            self.reason = "terminated (SIGTERM): the benchmark was stopped and cleaned up"
            self.stop()
            self.cleanup(always=True)
            return EXIT_TERMINATED
        except Failed as exc:
            self.reason = str(exc)
            self.log(self.reason)
            self.stop()
            self.cleanup(always=True)
            return EXIT_FAILED

    def _run(self) -> int:
        started = self.call(self.start_argv())
        self.check("start", started)
        self.log(next(iter(started.stdout.split("\n\n")), "").strip() or "started")
        code = self.wait()
        if code == EXIT_TIMEOUT:
            self.log(f"no result after {self.args.timeout:g} s: stopping the benchmark")
            self.stop()
        final = self.call(self.ctl("--status", "--verbose"))
        sys.stdout.write(final.stdout)
        sys.stdout.flush()
        self.check("--status --verbose", final)
        if code == EXIT_TIMEOUT:
            self.reason = f"no result after {self.args.timeout:g} s: the benchmark was stopped"
            self.cleanup(always=True)
            return code
        if not self.args.keep:
            self.check("--cleanup", self.call(self.ctl("--cleanup")))
        return 0

    def wait(self) -> int:
        """Poll ``--status`` until no server runs: 0 or EXIT_TIMEOUT; Failed when a server
        cannot be reached or has forgotten the benchmark (it restarted)."""
        deadline = time.monotonic() + self.args.timeout
        while True:
            time.sleep(min(self.args.interval, max(0.0, deadline - time.monotonic())))
            status = self.call(self.ctl("--status"))
            if status.returncode != 0:
                raise Failed(self.unreachable(status))
            counts = states(status.stdout)
            gone = counts.get("didn't run", 0)
            if gone:
                raise Failed(
                    f"{gone} storage server(s) no longer know the benchmark "
                    f"(a storage daemon restarted mid-run?); beegfs-ctl --status: "
                    f"{words(status)}"
                )
            if is_done(counts):
                return 0
            self.log(", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "no status yet")
            if time.monotonic() >= deadline:
                return EXIT_TIMEOUT

    def unreachable(self, status: subprocess.CompletedProcess[str]) -> str:
        """Why ``--status`` failed, with the targets' states as the management daemon sees
        them (a dead storage daemon's targets turn Probably-offline, then Offline)."""
        reason = (
            f"beegfs-ctl --storagebench --status failed (exit status {status.returncode}): "
            f"{words(status) or 'no output'}"
        )
        listing = self.call([*self.prefix, "--listtargets", "--nodetype=storage", "--state"])
        if listing.returncode == 0 and listing.stdout.strip():
            reason += "\nbeegfs-ctl --listtargets --state:\n" + listing.stdout.strip()
        return reason

    def stop(self) -> None:
        """``--stop``, then wait (STOP_WAIT_S at most) until no server is stopping."""
        done = self.call(self.ctl("--stop"))
        if done.returncode != 0:
            self.log(f"--stop: {words(done)}")
            return
        deadline = time.monotonic() + STOP_WAIT_S
        while time.monotonic() < deadline:
            counts = states(self.call(self.ctl("--status")).stdout)
            if not counts.get("running") and not counts.get("stopping"):
                return
            time.sleep(0.2)

    def cleanup(self, always: bool = False) -> None:
        """Remove the benchmark files from the targets (after a failure: best effort)."""
        if self.args.keep and not always:
            return
        done = self.call(self.ctl("--cleanup"))
        if done.returncode != 0:
            self.log(f"--cleanup: {words(done)}")


def _terminate(signum: int, frame: object) -> None:
    raise Terminated(signum)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; SIGTERM/SIGINT stop the benchmark instead of orphaning it."""
    args = parse_args(argv)
    previous = {s: signal.signal(s, _terminate) for s in (signal.SIGTERM, signal.SIGINT)}
    driver = Driver(args)
    try:
        code = driver.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if code and args.reason_file and driver.reason:
        with open(args.reason_file, "w", encoding="utf-8") as fh:
            fh.write(driver.reason[-4000:] + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
