"""Step-through mode: a driver's ready tasks held by the node until a step releases them
(layer L1, no I/O).

Where the hold sits. A task is held at the one point every task passes when it could start:
its arguments are all ready (`NodeState._deps_ready`), before it joins a ready queue or, for
an actor call, before it is marked ready at its place in the actor's queue. Everything else
keeps its usual meaning without a line of its own: a task whose arguments are not ready waits
for them as always (so what is held at any moment is exactly the DAG's ready set, and stepping
"a level" releases all of it); an actor's queue dispatches only from its head, so a released
call still waits for the calls before it (call order kept); `get` and `wait` of a held task's
ref are ordinary requests for a pending object, answered when it ends; `cancel` ends a held
task like a queued one. The alternative, holding submissions in the driver before they reach
the node, would have needed its own get/wait/dependency logic in the driver, and other
processes (workers submitting nested tasks) would have escaped it.

Cost when off: ``jobs`` is empty and `NodeState._deps_ready` tests it once per task.

State (the node daemon's thread only):

``jobs``   the jobs (drivers) in step mode
``held``   job -> its held tasks, in the order they became ready; a step releases from the front

Actor constructors are not held (an actor must exist for its calls to be held in order), nor
tasks another node forwarded here (their own node held them). The mode is per node: the tasks
of a driver that its node forwards to another node (resources only that node has) are held
where they become ready, here, before forwarding.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

from nbdist import events as ev
from nbdist.scheduler.notices import Notices
from nbdist.scheduler.records import Task
from nbdist.wire import protocol as P

# A step releases a number of tasks, or LEVEL: every held task (the ready set).
LEVEL = "level"


class Stepper:
    def __init__(self, notices: Notices, release: Callable[[Task], None]) -> None:
        self.notices = notices
        self._release = release  # puts a released task on its way (NodeState)
        self.jobs: set[int] = set()
        self.held: dict[int, collections.deque[Task]] = {}

    def hold(self, task: Task) -> bool:
        """Hold ``task`` if its job is in step mode (True), else leave it to run (False)."""
        job = task.spec[P.S_JOB]
        if job not in self.jobs or task.no_forward:
            return False
        self.held.setdefault(job, collections.deque()).append(task)
        self.notices.event(job, ev.TaskHeld, (task.id, task.spec[P.S_NAME]))
        return True

    def command(self, job: int, on: bool | None, release: int | str) -> tuple[dict, list[Task]]:
        """Turn ``job``'s mode on or off (``on`` None: as it is), then release ``release``
        of its held tasks (turning the mode off releases them all). Returns the reply for the
        driver and the tasks released."""
        if on is True:
            self.jobs.add(job)
        queue = self.held.get(job) or collections.deque()
        if on is False:
            self.jobs.discard(job)
            count = len(queue)
        elif release == LEVEL:
            count = len(queue)
        else:
            count = max(0, int(release))
        released: list[Task] = []
        while queue and len(released) < count:
            task = queue.popleft()
            if not task.finished:  # (a cancelled one ended while held)
                released.append(task)
        if not queue:
            self.held.pop(job, None)
        for task in released:
            self._release(task)
        held = self.held_count(job)
        state = job in self.jobs
        self.notices.event(job, ev.StepMode, (state, held, tuple(t.id for t in released)))
        reply = {"on": state, "held": held,
                 "released": [(t.id, t.spec[P.S_NAME]) for t in released]}
        return reply, released

    def held_count(self, job: int) -> int:
        return sum(not t.finished for t in self.held.get(job, ()))

    def job_ended(self, job: int) -> None:
        """The driver of ``job`` left: its held tasks go on as if the mode had never been on."""
        self.jobs.discard(job)
        for task in self.held.pop(job, ()):
            if not task.finished:
                self._release(task)
