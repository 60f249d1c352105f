"""The cluster file of ``nbdist up`` / ``nbdist down`` (layer L3).

It reads like Ray's on-premise cluster config, so a ``ray up`` file for a fixed set of
machines works as it is::

    cluster_name: lab
    provider: {type: local, head_ip: 10.0.0.1, worker_ips: [10.0.0.2, 10.0.0.3]}
    auth: {ssh_user: me, ssh_private_key: ~/.ssh/id_ed25519}
    setup_commands: ["pip install -q nbdist==0.1.0"]     # run on every host, in order
    available_node_types:                                # Ray's per-type resources
      head: {resources: {CPU: 2}}
      worker: {resources: {CPU: 4, disk: 1}}
    head_node_type: head
    nbdist:                                              # nbdist's own keys
      port: 6390                                         # the head's port
      resources: {10.0.0.3: {GPU: 1}}                    # per host, by its address
      install: false          # pip install this nbdist on hosts: true (from the index) or
                              # the path of its wheel here (copied to the hosts over SSH)

Keys of Ray's format that nbdist does not use (``max_workers``, ``head_start_ray_commands``,
``docker``, ...) and keys nobody knows are collected by name in ``ClusterSpec.ignored`` for
the caller to report; a malformed value of a key nbdist uses raises ``ValueError`` naming it.
Resources: a host's own entry under ``nbdist.resources`` wins over its node type's; ``CPU``
and ``GPU`` become the node's CPUs and GPUs, what is not given is detected on the host.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_PORT = 6390
_RAY_COMMAND_KEYS = ("initialization_commands", "setup_commands", "head_setup_commands",
                     "worker_setup_commands")
_NBDIST_KEYS = ("port", "resources", "install")


@dataclass
class ClusterSpec:
    """What ``up`` starts: a head host and worker hosts reached over SSH."""

    name: str
    head: str
    workers: list[str]
    user: str | None = None
    key: str | None = None
    port: int = DEFAULT_PORT
    resources: dict[str, dict[str, float]] = field(default_factory=dict)
    # Per host, the shell commands run before the version check (Ray's order: initialization,
    # then setup, then the head's or the workers' own setup).
    commands: dict[str, list[str]] = field(default_factory=dict)
    install: bool | str = False  # True: from the package index; a str: a wheel on this machine
    ignored: list[str] = field(default_factory=list)

    @property
    def hosts(self) -> list[str]:
        return [self.head, *self.workers]

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name or self.name.startswith("."):
            raise ValueError(f"cluster_name {self.name!r} must be a plain name, e.g. 'lab'.")
        if not self.head:
            raise ValueError("The cluster needs a head host (provider.head_ip).")
        seen = set()
        for host in self.hosts:
            if (not isinstance(host, str) or not host or host.startswith("-")
                    or any(c in host for c in " '\"@/;")):
                raise ValueError(f"Bad host {host!r}: expected an address or host name.")
            if host in seen:
                raise ValueError(f"Host {host} is listed twice; each host runs one node.")
            seen.add(host)
        if not 0 < self.port < 65536:
            raise ValueError(f"nbdist.port must be a TCP port (1-65535), not {self.port}.")
        if self.key:
            self.key = os.path.expanduser(self.key)
        for host in self.resources:
            if host not in seen:
                raise ValueError(f"nbdist.resources names {host}, which is not a host of the "
                                 f"cluster ({', '.join(self.hosts)}).")


def load(path: str | os.PathLike[str]) -> ClusterSpec:
    """Read a cluster file (YAML); ``ValueError`` says which key is wrong and how."""
    import yaml

    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ValueError(f"Cannot read the cluster file {path}: {exc.strerror or exc}.") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"The cluster file {path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"The cluster file {path} must be a mapping of keys (cluster_name, "
                         "provider, auth, ...).")
    return parse(data)


def parse(data: dict[str, Any]) -> ClusterSpec:
    """A `ClusterSpec` from the file's parsed mapping."""
    data = dict(data)
    ignored: list[str] = []
    provider = _mapping(data.pop("provider", None), "provider")
    kind = provider.pop("type", None)
    if kind != "local":
        raise ValueError(f"provider.type must be 'local' (a fixed set of machines reached over "
                         f"SSH), not {kind!r}; cloud providers and autoscaling are Ray's "
                         "(nbdist.init(backend='ray')).")
    head = provider.pop("head_ip", None)
    workers = provider.pop("worker_ips", None) or []
    if not isinstance(workers, list):
        raise ValueError("provider.worker_ips must be a list of addresses.")
    ignored += [f"provider.{k}" for k in provider]
    auth = _mapping(data.pop("auth", None), "auth")
    user, key = auth.pop("ssh_user", None), auth.pop("ssh_private_key", None)
    ignored += [f"auth.{k}" for k in auth]
    own = _mapping(data.pop("nbdist", None), "nbdist")
    ignored += [f"nbdist.{k}" for k in own if k not in _NBDIST_KEYS]
    hosts = [str(head or ""), *map(str, workers)]
    spec = ClusterSpec(
        name=str(data.pop("cluster_name", "default")), head=hosts[0], workers=hosts[1:],
        user=str(user) if user else None, key=str(key) if key else None,
        port=_int(own.get("port", DEFAULT_PORT), "nbdist.port"),
        resources=_resources(data, own, hosts, ignored), commands=_commands(data, hosts),
        install=_install(own.get("install", False)))
    spec.ignored = ignored + sorted(data)
    return spec


def _install(value: Any) -> bool | str:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value:
        return value
    raise ValueError("nbdist.install must be true, false or the path of nbdist's wheel on "
                     f"this machine, not {value!r}.")


def _mapping(value: Any, key: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{key} must be a mapping, not {type(value).__name__}.")
    return dict(value)


def _int(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{key} must be a whole number, not {value!r}.")
    return value


def _amounts(value: Any, key: str) -> dict[str, float]:
    value = _mapping(value, key)
    for name, amount in value.items():
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0:
            raise ValueError(f"{key}.{name} must be a number of 0 or more, not {amount!r}.")
    return {str(k): float(v) for k, v in value.items()}


def _resources(data: dict[str, Any], own: dict[str, Any], hosts: list[str],
               ignored: list[str]) -> dict[str, dict[str, float]]:
    """Per host: its node type's resources (Ray's ``available_node_types``), then its own;
    the node types' other keys (``node_config``, ``min_workers``, ...) go to ``ignored``."""
    out: dict[str, dict[str, float]] = {}
    types = _mapping(data.pop("available_node_types", None), "available_node_types")
    head_type = data.pop("head_node_type", None)
    if types:
        if head_type not in types:
            raise ValueError(f"head_node_type {head_type!r} is not one of available_node_types "
                             f"({', '.join(map(str, types))}).")
        worker_types = [t for t in types if t != head_type]
        if len(worker_types) > 1:
            raise ValueError("available_node_types: nbdist takes one worker type for all "
                             "worker_ips; give hosts their own resources under "
                             "nbdist.resources instead.")
        by_type = {}
        for t in types:
            entry = _mapping(types[t], f"available_node_types.{t}")
            by_type[t] = _amounts(entry.get("resources"), f"available_node_types.{t}.resources")
            ignored += [f"available_node_types.{t}.{k}" for k in entry if k != "resources"]
        out[hosts[0]] = dict(by_type[head_type])
        for host in hosts[1:]:
            out[host] = dict(by_type[worker_types[0]]) if worker_types else {}
    for host, amounts in _mapping(own.get("resources"), "nbdist.resources").items():
        out.setdefault(str(host), {}).update(_amounts(amounts, f"nbdist.resources.{host}"))
    return {h: r for h, r in out.items() if r}


def _commands(data: dict[str, Any], hosts: list[str]) -> dict[str, list[str]]:
    lists = {}
    for key in _RAY_COMMAND_KEYS:
        value = data.pop(key, None) or []
        if not isinstance(value, list) or not all(isinstance(c, str) for c in value):
            raise ValueError(f"{key} must be a list of shell commands.")
        lists[key] = value
    common = lists["initialization_commands"] + lists["setup_commands"]
    return {host: common + lists["head_setup_commands" if i == 0 else "worker_setup_commands"]
            for i, host in enumerate(hosts)}
