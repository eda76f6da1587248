"""The chash.migration tests: the batches, routes, state and warming of a
Migration against routing both rings (test_migration.py), and a real
resharding of redis-server cache nodes under reader threads
(test_resharding.py)."""
