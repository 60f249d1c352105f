"""joblib's parallel backend over nbdist tasks.

joblib hands the backend batches of calls (``BatchedCalls``, a picklable callable); `submit`
runs each as one task (``ray_remote_args`` are its options) and returns a
``concurrent.futures.Future`` that a small pool of threads of this process resolves with
``nbdist.get``, calling joblib's callback when the batch is done. An error in a batch reaches
``Parallel`` as the call's own exception type; joblib then calls `abort_everything`, which
cancels the batches still pending. Batch sizes adapt to how long batches take
(``AutoBatchingMixin``), so many tiny calls do not become many tiny tasks.

``n_jobs=-1`` means every CPU of the cluster (``cluster_resources()["CPU"]``), starting a
local cluster first if this process is not a driver yet, as Ray's backend does.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from joblib._parallel_backends import AutoBatchingMixin, ParallelBackendBase

import nbdist

# Threads that wait on results: each blocks in one get; joblib keeps about 2 * n_jobs batches
# in flight (pre_dispatch), so this bounds only how soon a finished batch is noticed.
MAX_WAITERS = 64


def _run_batch(batch: Any) -> Any:
    return batch()


class NbdistBackend(AutoBatchingMixin, ParallelBackendBase):
    """joblib's backend named "ray" (and "nbdist") by `nbdist.util.joblib.register_ray`."""

    supports_retrieve_callback = True
    supports_return_generator = True
    supports_timeout = True
    supports_sharedmem = False

    def __init__(self, nesting_level: int | None = None,
                 inner_max_num_threads: int | None = None,
                 ray_remote_args: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(nesting_level=nesting_level,
                         inner_max_num_threads=inner_max_num_threads, **kwargs)
        self.ray_remote_args = ray_remote_args
        self._task: Any = None
        self._waiters: ThreadPoolExecutor | None = None
        self._pending: set[Any] = set()
        self._lock = threading.Lock()

    def configure(self, n_jobs: int = 1, parallel: Any = None, prefer: str | None = None,
                  require: str | None = None, ray_remote_args: dict[str, Any] | None = None,
                  **backend_kwargs: Any) -> int:
        if require == "sharedmem":
            raise ValueError("The nbdist ('ray') joblib backend runs calls in other processes; "
                             "require='sharedmem' needs the threading backend.")
        n_jobs = self.effective_n_jobs(n_jobs)
        options = ray_remote_args if ray_remote_args is not None else self.ray_remote_args
        task = nbdist.remote(_run_batch)
        self._task = task.options(**options) if options else task
        self._waiters = ThreadPoolExecutor(min(MAX_WAITERS, 2 * n_jobs + 2),
                                           thread_name_prefix="nbdist-joblib")
        self.parallel = parallel
        return n_jobs

    def effective_n_jobs(self, n_jobs: int | None) -> int:
        if n_jobs == 0:
            raise ValueError("n_jobs == 0 in Parallel has no meaning")
        if n_jobs is None:
            return 1
        if n_jobs < 0:
            if not nbdist.is_initialized():
                nbdist.init()
            cpus = int(nbdist.cluster_resources().get("CPU", 1))
            return max(cpus + 1 + n_jobs, 1)
        return int(n_jobs)

    def submit(self, func: Any, callback: Any = None) -> Future[Any]:
        if self._task is None or self._waiters is None:
            raise RuntimeError("The nbdist joblib backend was not configured: use it through "
                               "joblib.Parallel.")
        ref = self._task.remote(func)
        with self._lock:
            self._pending.add(ref)
        future = self._waiters.submit(self._result, ref)
        if callback is not None:
            future.add_done_callback(callback)
        return future

    def _result(self, ref: Any) -> Any:
        try:
            return nbdist.get(ref)
        finally:
            with self._lock:
                self._pending.discard(ref)

    def retrieve_result_callback(self, future: Future[Any]) -> Any:
        return future.result()

    def abort_everything(self, ensure_ready: bool = True) -> None:
        """A batch failed: the others are not wanted any more."""
        with self._lock:
            pending, self._pending = list(self._pending), set()
        for ref in pending:
            try:
                nbdist.cancel(ref, force=True)
            except Exception:  # already finished, or its driver is gone
                continue
        if not ensure_ready:
            self.terminate()

    def terminate(self) -> None:
        if self._waiters is not None:
            self._waiters.shutdown(wait=False)
            self._waiters = None
        self._task = None
        self.reset_batch_stats()
