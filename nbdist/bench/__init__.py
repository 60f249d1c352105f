"""``nbdist microbenchmark``: nbdist's core API against Ray's, scenario by scenario.

    microbenchmark.py   the scenarios and the runner (both systems in one sitting)
    table.py            the table: rows, goals, the median run per scenario
"""
