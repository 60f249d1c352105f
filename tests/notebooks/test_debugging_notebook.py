"""11-debugging runs top to bottom in a real kernel and shows what its text claims: a task
paused at breakpoint() and driven through pdb, a remote error's frames with their locals,
%nbdist why and %nbdist stack on a starved task, and the pickling error's path."""

from __future__ import annotations

import re

import pytest
from outputs import find

pytestmark = pytest.mark.timeout(120)


def test_11_debugging_breakpoint_post_mortem_why_stack_and_pickling(run_notebook,
                                                                    cell_text) -> None:
    nb = run_notebook("11-debugging.ipynb")
    assert nb.cells[0].source.startswith("# 11 · Debugging remote code")
    cells = cell_text(nb)
    find(cells, r"\d{8}\s+scale\s+pid \d+ .*paused \d+ s at a breakpoint")
    find(cells, re.escape("nbdist: task 'scale' paused at a breakpoint"))
    find(cells, re.escape("(Pdb) p values, factor\n([1, 2, 3], 10)"))
    find(cells, re.escape("[10, 20, 30]"))
    find(cells, re.escape("session ended with: continue ; result: 60"))
    find(cells, re.escape("raised in average() at line 5 with {'rows': [], 'total': 0, "
                          "'count': 0}"))
    find(cells, "starved\\(\\) did not run within 1 s")
    find(cells, r"'starved' \(\w+\): pending for \d+ s, not started: .*CPU 0/2.*held by task "
                r"'hog' running for \d+ s")
    find(cells, r"task 'hog' .*\n  thread MainThread:\n(.*\n)*.*time.sleep\(seconds\)")
    find(cells, "after the hog is cancelled: ran")
    find(cells, re.escape("because of locked_add -> lock (lock: cannot pickle"))
