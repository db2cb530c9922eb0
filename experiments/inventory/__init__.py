"""Inventory logic: BeeGFS topology from the CLIs, theoretical limits, the localhost testbed."""
