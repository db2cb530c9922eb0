"""``python -m tests.soak`` (``make soak``): the long chaos soak, its figures printed.

SOAK_RUNS (default 300), SOAK_FAULTS (default 140), SOAK_PER_KIND (default 20: at least that
many faults of each kind), SOAK_KINDS ("all", a list, or kinds to leave out as "-clock,..."),
SOAK_SEED (default: drawn, and printed). Needs root (namespaces, loop devices, its own
PostgreSQL run as the postgres user). Exits 1 when an invariant did not hold."""

from __future__ import annotations

import os
import random
import sys
import tempfile
from pathlib import Path


def main() -> int:
    from tests.labs.servers import unavailable
    from tests.soak.harness import Config, Soak, clock_unavailable

    reason = unavailable()
    if reason:
        print(f"the soak cannot run here: {reason}", file=sys.stderr)
        return 2
    os.environ.setdefault("SOAK_SEED", str(random.SystemRandom().randrange(1, 10**6)))
    config = Config.from_env(runs=300, faults=140, per_kind=20)
    if "clock" in config.kinds and clock_unavailable():
        print(f"clock steps cannot be simulated here: {clock_unavailable()}; leave them out "
              "with SOAK_KINDS=-clock", file=sys.stderr)  # fmt: skip
        return 2
    keep = os.environ.get("SOAK_KEEP", "")
    tmp = Path(tempfile.mkdtemp(prefix="soak-", dir=keep or None))
    soak = Soak(tmp, config)
    try:
        soak.start()
        outcome = soak.run()
    finally:
        soak.close()
    print(soak.report(outcome))
    print(f"logs: {tmp}")
    return 0 if not outcome.failures else 1


if __name__ == "__main__":
    sys.exit(main())
