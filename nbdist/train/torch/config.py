"""PyTorch's set-up of a worker group: the ``env://`` rendezvous variables and one process
group per run (gloo on CPU, nccl when the workers hold GPUs)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from ..backend import BackendConfig, WorkerInfo
from ..context import TrainContext


@dataclass
class TorchConfig(BackendConfig):
    """``backend``: ``"gloo"`` or ``"nccl"`` (None: nccl with GPUs, else gloo);
    ``timeout_s``: how long a collective waits for a peer before it fails."""

    backend: str | None = None
    init_method: str = "env"
    timeout_s: int = 1800

    def worker_env(self, workers: list[WorkerInfo],
                   contexts: list[TrainContext]) -> list[dict[str, str]]:
        master = workers[0]
        return [{
            "MASTER_ADDR": master.ip,
            "MASTER_PORT": str(master.port),
            "RANK": str(ctx.world_rank),
            "WORLD_SIZE": str(ctx.world_size),
            "LOCAL_RANK": str(ctx.local_rank),
            "LOCAL_WORLD_SIZE": str(ctx.local_world_size),
            "NODE_RANK": str(ctx.node_rank),
            "GROUP_RANK": str(ctx.node_rank),
        } for ctx in contexts]

    def on_start(self, context: TrainContext) -> None:
        import torch.distributed as dist

        if self.init_method != "env":
            raise ValueError(f"TorchConfig(init_method={self.init_method!r}): only 'env' is "
                             "supported (MASTER_ADDR/MASTER_PORT are set for each worker).")
        backend = self.backend or ("nccl" if context.use_gpu else "gloo")
        if backend == "nccl":
            import torch

            torch.cuda.set_device(context.local_rank)
        dist.init_process_group(backend=backend, init_method="env://",
                                rank=context.world_rank, world_size=context.world_size,
                                timeout=datetime.timedelta(seconds=self.timeout_s))

    def on_shutdown(self) -> None:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
