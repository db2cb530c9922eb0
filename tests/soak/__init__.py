"""The chaos soak (issue 28): ``harness.Soak`` runs it, ``faults.plan`` draws its faults from a
seed, ``servers`` gives it PostgreSQL and Redis of its own; ``python -m tests.soak`` (``make
soak``) runs the long one, tests/test_netns_chaos_soak.py the short one."""
