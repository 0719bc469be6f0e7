"""Many runs: the planning gate, the launchers' glue (pool, submit), and reading a sweep back (table, report, status)."""
