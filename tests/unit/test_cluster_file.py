"""The cluster file of ``nbdist up``: Ray's on-premise format, nbdist's own keys, and the names
of what nbdist does not use."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from nbdist.cluster import cluster_file
from nbdist.cluster.remote import _start_command

RAY_FILE = """\
cluster_name: lab
max_workers: 2
upscaling_speed: 1.0
idle_timeout_minutes: 5
docker: {image: rayproject/ray:latest, container_name: ray_container}
provider:
  type: local
  head_ip: 10.0.0.1
  worker_ips: [10.0.0.2, 10.0.0.3]
auth:
  ssh_user: me
  ssh_private_key: ~/.ssh/lab_key
initialization_commands: ["echo init"]
setup_commands: ["pip install -q nbdist"]
head_setup_commands: ["echo head"]
worker_setup_commands: ["echo worker"]
head_start_ray_commands: ["ray stop", "ray start --head --port=6379"]
worker_start_ray_commands: ["ray stop", "ray start --address=$RAY_HEAD_IP:6379"]
available_node_types:
  head: {resources: {CPU: 2}, node_config: {}}
  worker: {resources: {CPU: 4, disk: 1}, node_config: {}, min_workers: 2}
head_node_type: head
"""


def _load(tmp_path: Path, text: str) -> cluster_file.ClusterSpec:
    path = tmp_path / "cluster.yaml"
    path.write_text(textwrap.dedent(text))
    return cluster_file.load(path)


def test_a_ray_on_premise_file_reads_with_the_unused_keys_named(tmp_path: Path) -> None:
    spec = _load(tmp_path, RAY_FILE)
    assert (spec.name, spec.head, spec.workers) == ("lab", "10.0.0.1", ["10.0.0.2", "10.0.0.3"])
    assert spec.user == "me" and spec.key == str(Path.home() / ".ssh/lab_key")
    assert spec.port == cluster_file.DEFAULT_PORT and not spec.install
    assert spec.resources == {"10.0.0.1": {"CPU": 2.0},
                              "10.0.0.2": {"CPU": 4.0, "disk": 1.0},
                              "10.0.0.3": {"CPU": 4.0, "disk": 1.0}}
    assert spec.commands["10.0.0.1"] == ["echo init", "pip install -q nbdist", "echo head"]
    assert spec.commands["10.0.0.3"] == ["echo init", "pip install -q nbdist", "echo worker"]
    assert spec.ignored == ["available_node_types.head.node_config",
                            "available_node_types.worker.node_config",
                            "available_node_types.worker.min_workers",
                            "docker", "head_start_ray_commands", "idle_timeout_minutes",
                            "max_workers", "upscaling_speed", "worker_start_ray_commands"]


def test_nbdist_keys_per_host_resources_and_unknown_keys(tmp_path: Path) -> None:
    spec = _load(tmp_path, """\
        cluster_name: small
        provider: {type: local, head_ip: h1, worker_ips: [h2], coordinator_address: x}
        auth: {ssh_user: me, ssh_proxy_command: "nc %h %p"}
        nbdist:
          port: 7000
          install: true
          resources: {h2: {GPU: 1, tpu: 2}}
          colour: blue
        spelled_wrong: 1
        """)
    assert spec.port == 7000 and spec.install and spec.key is None
    assert spec.resources == {"h2": {"GPU": 1.0, "tpu": 2.0}}
    assert spec.ignored == ["provider.coordinator_address", "auth.ssh_proxy_command",
                            "nbdist.colour", "spelled_wrong"]
    # CPU and GPU become the node's flags, the rest its custom resources.
    command = _start_command(spec, "h2", "h1:7000")
    assert command == ("nbdist _ssh-host start --cluster small --ip h2 --role node --head "
                       "h1:7000 --num-gpus 1.0 --resources '{\"tpu\": 2.0}'")
    assert _start_command(spec, "h1", "") == ("nbdist _ssh-host start --cluster small --ip h1 "
                                              "--role head --port 7000")


@pytest.mark.parametrize(("text", "message"), [
    ("provider: {type: aws, region: us-west-2}", "provider.type must be 'local'"),
    ("provider: {type: local, worker_ips: [h2]}", "needs a head host"),
    ("provider: {type: local, head_ip: h1, worker_ips: h2}", "worker_ips must be a list"),
    ("provider: {type: local, head_ip: h1, worker_ips: [h1]}", "h1 is listed twice"),
    ("provider: {type: local, head_ip: 'h1; rm -rf /'}", "Bad host"),
    ("provider: {type: local, head_ip: -oProxyCommand=evil}", "Bad host"),
    ("provider: {type: local, head_ip: h1}\nnbdist: {port: 70000}", "nbdist.port must be"),
    ("provider: {type: local, head_ip: h1}\nnbdist: {resources: {h9: {CPU: 1}}}",
     "names h9, which is not a host"),
    ("provider: {type: local, head_ip: h1}\nnbdist: {resources: {h1: {CPU: -1}}}",
     "nbdist.resources.h1.CPU must be a number of 0 or more"),
    ("provider: {type: local, head_ip: h1}\nsetup_commands: echo hi",
     "setup_commands must be a list"),
    ("provider: {type: local, head_ip: h1}\ncluster_name: ../up", "must be a plain name"),
    ("provider: {type: local, head_ip: h1}\navailable_node_types: {a: {}, b: {}, c: {}}\n"
     "head_node_type: a", "one worker type"),
    ("provider: {type: local, head_ip: h1}\navailable_node_types: {a: {}}\n"
     "head_node_type: z", "head_node_type 'z' is not one of"),
    ("- just\n- a list", "must be a mapping of keys"),
    ("provider: [unclosed", "not valid YAML"),
])
def test_a_wrong_file_says_which_key_and_why(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        _load(tmp_path, text)
    assert message in str(caught.value), str(caught.value)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Cannot read the cluster file .*nowhere.yaml"):
        cluster_file.load(tmp_path / "nowhere.yaml")
