"""Low-level helpers every layer may use: input checks, validators, keyset pagination, statistics,
bottleneck verdicts, tuning keys."""
