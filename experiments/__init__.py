"""The beeweb domain: inventory, tuning sets, runs and their metrics, comparisons."""
