"""The names every runtime context offers (Ray's ``get_runtime_context()``), whatever backend
answers the ``get_*`` calls behind them."""

from __future__ import annotations

from typing import Any


class ContextNames:
    """Attribute forms of the ``get_*`` methods, and ``get()`` (a dict of them)."""

    def get_job_id(self) -> str:
        raise NotImplementedError

    def get_task_id(self) -> str | None:
        raise NotImplementedError

    def get_node_id(self) -> str:
        raise NotImplementedError

    def get_actor_id(self) -> str | None:
        raise NotImplementedError

    @property
    def namespace(self) -> str:
        raise NotImplementedError

    @property
    def job_id(self) -> str:
        return self.get_job_id()

    @property
    def task_id(self) -> str | None:
        return self.get_task_id()

    @property
    def node_id(self) -> str:
        return self.get_node_id()

    @property
    def actor_id(self) -> str | None:
        return self.get_actor_id()

    def get(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "task_id": self.task_id, "node_id": self.node_id,
                "actor_id": self.actor_id, "namespace": self.namespace}
