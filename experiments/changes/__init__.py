"""Change points over the history of each configuration: found (detection), explained
(explain), stored and kept up as runs land (scan, tasks)."""
