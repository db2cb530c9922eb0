"""`python -I -S runners/reaper.py PARENT_PID -- ARGV...` (or `python -m runners.reaper …`):
run a benchmark tool so that it never outlives its worker. Standard library only.

The executor starts this shim as the leader of a new process group; the shim starts the
tool in that group and asks the kernel to signal it when the worker dies
(``PR_SET_PDEATHSIG``). On that signal, or on a cancel's SIGTERM, it stops the whole group:
SIGTERM, then SIGKILL after a grace period. This covers tools that fork (fio's job
processes, mpirun's ranks), which a death signal on the tool alone would leave running.
No shell is involved: the tool's argv is passed through as a list.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time

# The shim starts once per run, so its imports are kept lean: no ``subprocess`` (it pulls in
# locale, re, enum, … — longer than a short benchmark runs; posix_spawn and waitpid do the
# same job), and the C ``_signal`` module rather than ``signal``, whose enum wrappers cost
# another few milliseconds. Same functions and integer constants.
try:
    import _signal as signal
except ImportError:  # pragma: no cover - other Python implementations
    import signal

GRACE_SECONDS = 5.0
PR_SET_PDEATHSIG = 1


def main(args: list[str]) -> int:
    if len(args) < 3 or args[1] != "--":
        print("usage: python -m runners.reaper PARENT_PID -- ARGV...", file=sys.stderr)
        return 2
    parent, argv = int(args[0]), args[2:]
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass
    if os.getppid() != parent:  # the worker died before the death signal was armed
        return 137
    try:
        child = os.posix_spawnp(argv[0], argv, os.environ)
    except OSError as exc:
        print(f"could not start {argv[0]}: {exc}", file=sys.stderr)
        return 127

    def stop(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            os.killpg(0, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + GRACE_SECONDS
        while time.monotonic() < deadline:
            try:
                if os.waitpid(child, os.WNOHANG)[0]:
                    break
            except ChildProcessError:
                break
            time.sleep(0.1)
        # Whatever is left of the group, the shim included, goes now.
        os.killpg(0, signal.SIGKILL)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    _, status = os.waitpid(child, 0)
    returncode = os.waitstatus_to_exitcode(status)
    return returncode if returncode >= 0 else 128 - returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
