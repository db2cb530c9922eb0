"""Run BeeGFS StorageBench to completion: start, poll, print the verbose status, clean up.

StorageBench runs asynchronously inside the storage servers; ``beegfs-ctl --storagebench``
only starts it and reports on it. This driver turns that into one blocking command whose
stdout is the final ``--status --verbose`` report (what runners.parsers.storagebench reads)::

    python -m runners.tools.storagebench_driver --alltargets --write \
        --blocksize 512K --size 1G --threads 4 [--odirect] [--interval 5] [--timeout 3600]

Progress goes to stderr. Exit status: 0 done, 1 a beegfs-ctl call or a target failed,
124 timeout (the benchmark is stopped), 143 terminated by SIGTERM/SIGINT (stopped too).
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

EXIT_FAILED = 1
EXIT_TIMEOUT = 124
EXIT_TERMINATED = 143

_STATE_RE = re.compile(
    r"^\s*(Finished|Running|Stopping|Stopped|Error|Uninitialized|Idle)\s*:\s*(\d+)\s*$",
    re.IGNORECASE | re.MULTILINE,
)
_SIZE_RE = re.compile(r"\d{1,18}[KMGT]?")
_IDS_RE = re.compile(r"\d{1,9}(,\d{1,9})*")


class Terminated(Exception):
    """SIGTERM or SIGINT arrived while the benchmark ran."""


def states(text: str) -> dict[str, int]:
    """Target counts per state from ``--status`` output: {"running": 3, "finished": 7}."""
    counts: dict[str, int] = {}
    for name, count in _STATE_RE.findall(text):
        counts[name.lower()] = counts.get(name.lower(), 0) + int(count)
    return counts


def is_done(counts: dict[str, int]) -> bool:
    """No target is running or stopping, and at least one has an outcome."""
    if counts.get("running", 0) or counts.get("stopping", 0):
        return False
    return any(counts.get(s, 0) for s in ("finished", "stopped", "error"))


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
    parser.add_argument("--ctl", default="beegfs-ctl", help="beegfs-ctl binary")
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
    parser.add_argument("--keep", action="store_true", help="skip --cleanup (for a later read)")
    return parser.parse_args(argv)


class Driver:
    """One StorageBench run driven through ``beegfs-ctl``."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.targets = ["--alltargets"] if args.alltargets else [f"--targetids={args.targetids}"]

    def ctl(self, *extra: str) -> list[str]:
        """argv of one ``beegfs-ctl --storagebench`` call on the chosen targets."""
        return [self.args.ctl, "--storagebench", *self.targets, *extra]

    def call(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` (no shell); a binary that cannot start or hangs is exit status 127."""
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return subprocess.CompletedProcess(argv, 127, "", f"{exc}\n")

    def log(self, message: str) -> None:
        print(f"storagebench: {message}", file=sys.stderr, flush=True)

    def fail(self, what: str, done: subprocess.CompletedProcess[str]) -> int:
        self.log(f"{what} failed with exit status {done.returncode}")
        sys.stderr.write(done.stdout + done.stderr)
        return EXIT_FAILED

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
            self.call(self.ctl("--stop"))
            self.cleanup()
            return EXIT_TERMINATED

    def _run(self) -> int:
        started = self.call(self.start_argv())
        if started.returncode != 0:
            return self.fail("start", started)
        sys.stderr.write(started.stdout)
        code = self.wait()
        if code == EXIT_TIMEOUT:
            self.log(f"no result after {self.args.timeout:g} s: stopping the benchmark")
            self.call(self.ctl("--stop"))
        final = self.call(self.ctl("--status", "--verbose"))
        sys.stdout.write(final.stdout)
        sys.stdout.flush()
        cleaned = self.cleanup()
        if final.returncode != 0:
            return self.fail("status --verbose", final)
        if code == 0 and states(final.stdout).get("error", 0):
            self.log("a target reported an error")
            code = EXIT_FAILED
        return code or cleaned

    def wait(self) -> int:
        """Poll ``--status`` until no target runs: 0, EXIT_FAILED or EXIT_TIMEOUT."""
        deadline = time.monotonic() + self.args.timeout
        while True:
            time.sleep(min(self.args.interval, max(0.0, deadline - time.monotonic())))
            status = self.call(self.ctl("--status"))
            if status.returncode != 0:
                return self.fail("status", status)
            counts = states(status.stdout)
            if is_done(counts):
                return 0
            self.log(", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "no status yet")
            if time.monotonic() >= deadline:
                return EXIT_TIMEOUT

    def cleanup(self) -> int:
        """Remove the benchmark files from the targets unless ``--keep``."""
        if self.args.keep:
            return 0
        done = self.call(self.ctl("--cleanup"))
        return self.fail("cleanup", done) if done.returncode != 0 else 0


def _terminate(signum: int, frame: object) -> None:
    raise Terminated(signum)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; SIGTERM/SIGINT stop the benchmark instead of orphaning it."""
    args = parse_args(argv)
    previous = {s: signal.signal(s, _terminate) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        return Driver(args).run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
