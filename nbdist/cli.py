"""The ``nbdist`` command (layer L3)."""

from __future__ import annotations

import sys
from typing import Any


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: nbdist <command> [options]\n\ncommands:\n"
              "  start            start a cluster head (--head) or join one (--address)\n"
              "  stop             stop what `nbdist start` started on this machine\n"
              "  status           the cluster's nodes, workers, resources and object store\n"
              "  up FILE          start a cluster on other machines over SSH (a cluster file)\n"
              "  down FILE        stop what `nbdist up FILE` started, on every host\n"
              "  debug [TASK]     the pdb prompt of a task paused at breakpoint() (--list)\n"
              "  install-kernel   install the Jupyter kernel \"Python 3 (nbdist)\"\n"
              "  microbenchmark   measure nbdist (and, with --compare ray, Ray) side by side")
        return 0
    if argv[0] in ("-V", "--version"):
        import platform

        from nbdist import __version__

        print(f"nbdist {__version__} (Python {platform.python_version()})")
        return 0
    command, rest = argv[0], argv[1:]
    if command in ("up", "down", "_ssh-host"):
        return _remote_command(command, rest)
    if command in ("start", "stop", "status"):
        from nbdist.exceptions import ClusterError

        try:
            return {"start": _start, "stop": _stop, "status": _status}[command](rest)
        except (ClusterError, ValueError) as exc:
            print(f"nbdist {command}: {exc}", file=sys.stderr)
            return 1
    if command == "debug":
        from nbdist.util.pdb import main as debug_main

        return debug_main(rest)
    if command == "install-kernel":
        return _install_kernel(rest)
    if command == "microbenchmark":
        from nbdist.bench import microbenchmark

        return microbenchmark.main(rest)
    print(f"nbdist: unknown command {command!r}; see 'nbdist --help'", file=sys.stderr)
    return 2


def _resources_arg(text: str | None) -> dict[str, float] | None:
    import json

    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"--resources must be a JSON object, e.g. '{{\"disk\": 2}}': {exc}"
                         ) from None
    if not isinstance(data, dict) or not all(isinstance(v, (int, float)) for v in data.values()):
        raise ValueError("--resources must be a JSON object of numbers, e.g. '{\"disk\": 2}'")
    return {str(k): float(v) for k, v in data.items()}


def _tls_flags(parser: Any) -> None:
    parser.add_argument("--tls-cert", metavar="PEM", help="TLS certificate for TCP traffic "
                        "(or NBDIST_TLS_CERT); every node of the cluster needs one")
    parser.add_argument("--tls-key", metavar="PEM", help="its private key (or NBDIST_TLS_KEY)")
    parser.add_argument("--tls-ca", metavar="PEM", help="CA that signed the cluster's "
                        "certificates; peers must present one it signed (or NBDIST_TLS_CA)")


def _tls_arg(args: Any) -> dict[str, str]:
    return {k: v for k, v in (("cert", args.tls_cert), ("key", args.tls_key),
                              ("ca", args.tls_ca)) if v}


def _start(argv: list[str]) -> int:
    import argparse

    from nbdist.cluster import standalone

    parser = argparse.ArgumentParser(
        prog="nbdist start",
        description="Start a cluster head and a node on this machine (--head), or a node that "
                    "joins a running cluster (--address). The daemons keep running after this "
                    "command returns; `nbdist stop` ends them.")
    role = parser.add_mutually_exclusive_group(required=True)
    role.add_argument("--head", action="store_true", help="start a head and a node")
    role.add_argument("--address", metavar="HOST:PORT", help="the head of the cluster to join")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default: 127.0.0.1, this machine only; "
                             "use this machine's address or 0.0.0.0 to let others connect)")
    parser.add_argument("--port", type=int, default=standalone.DEFAULT_PORT,
                        help=f"head port (default: {standalone.DEFAULT_PORT}; 0 picks a free one)")
    parser.add_argument("--client-port", type=int, default=None,
                        help="with --head: port for thin drivers, nbdist.init(\"nbdist://HOST:"
                             "PORT\") (default: the head port + 1; -1: none)")
    parser.add_argument("--token", help="the cluster token, when joining from another machine "
                                        "(or set NBDIST_TOKEN)")
    parser.add_argument("--num-cpus", type=float, help="logical CPUs (default: all cores)")
    parser.add_argument("--num-gpus", type=float, help="logical GPUs (default: 0)")
    parser.add_argument("--resources", help='custom resources as JSON, e.g. \'{"disk": 2}\'')
    parser.add_argument("--object-store-memory", type=int, metavar="BYTES",
                        help="object store capacity (default: 30%% of RAM)")
    _tls_flags(parser)
    args = parser.parse_args(argv)
    resources = _resources_arg(args.resources)
    common = {"num_cpus": args.num_cpus, "num_gpus": args.num_gpus, "resources": resources,
              "object_store_memory": args.object_store_memory, "tls": _tls_arg(args)}
    if args.head:
        session = standalone.start_head(args.host, args.port, client_port=args.client_port,
                                        **common)
        address = standalone.display_address(session.head)
        print(f"nbdist head started at {address} (head pid {session.pids[0]}, node pid "
              f"{session.node_pid}); files and logs in {session.path}")
        reach = address
        if address.startswith("0.0.0.0:"):  # listening everywhere: others use a real name
            import socket

            reach = f"{socket.gethostname()}:{address.rsplit(':', 1)[1]}"
        print("\nTo add a node on another machine (with the address there that this one "
              "can reach):\n"
              f"    nbdist start --address {reach} --token {session.token} --host ADDRESS")
        print("On this machine the token is found without --token:\n"
              f"    nbdist start --address {address}")
        print(f"\nTo attach a driver on a machine with a node:\n"
              f"    nbdist.init(address=\"{address}\")      # or: %nbdist start --address "
              f"{address}")
        if session.client:
            thin = standalone.display_address(session.client)
            print(f"\nTo attach a driver from any machine (a thin driver; set NBDIST_TOKEN, "
                  f"and NBDIST_TLS_* with TLS):\n    nbdist.init(\"nbdist://{thin}\")")
        print("\nTo stop what was started on this machine:  nbdist stop")
        return 0
    session = standalone.start_node(args.address, token=args.token, host=args.host, **common)
    print(f"nbdist node started (pid {session.node_pid}) and joined the cluster at "
          f"{standalone.display_address(session.head)}; logs in {session.path}")
    return 0


def _stop(argv: list[str]) -> int:
    import argparse

    from nbdist.cluster import standalone

    parser = argparse.ArgumentParser(
        prog="nbdist stop", description="Stop the heads and nodes `nbdist start` started on this "
                                        "machine (all of them, or one cluster's).")
    parser.add_argument("--address", metavar="HOST:PORT", help="only this cluster's processes")
    parser.add_argument("-f", "--force", action="store_true",
                        help="kill at once (SIGKILL) rather than asking them to exit")
    parser.add_argument("-g", "--grace-period", type=float, default=standalone.STOP_GRACE_S,
                        metavar="SECONDS", help="how long they may take to exit before they "
                        f"are killed (default {standalone.STOP_GRACE_S:g})")
    parser.add_argument("-v", "--verbose", action="store_true", help="name each process")
    args = parser.parse_args(argv)
    if args.grace_period < 0:
        raise ValueError("--grace-period must be 0 or more seconds")
    done = standalone.stop_all(args.address, args.grace_period, args.force)
    if not done:
        print("nbdist stop: nothing started by `nbdist start` runs on this machine")
        return 0
    for session, ran in done:
        where = standalone.display_address(session.head)
        if ran:
            how = "killed" if args.force else "stopped"
            pids = f" (pids {', '.join(map(str, session.pids))})" if args.verbose else ""
            print(f"{how} the {session.role} of {where}{pids}")
        else:
            print(f"removed the files of a {session.role} of {where} whose processes had "
                  "already exited")
    return 0


def _status(argv: list[str]) -> int:
    import argparse
    import json

    from nbdist.cluster import standalone

    parser = argparse.ArgumentParser(
        prog="nbdist status", description="Show the cluster's nodes (from its head).")
    parser.add_argument("--address", metavar="HOST:PORT",
                        help="the cluster's head (default: the cluster started on this machine)")
    parser.add_argument("--token", help="the cluster token (or NBDIST_TOKEN)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="also each node's tasks, actors and objects")
    # Scripts written for `ray status` pass this; nbdist authenticates with the token.
    parser.add_argument("--redis_password", "--redis-password", help=argparse.SUPPRESS)
    _tls_flags(parser)
    args = parser.parse_args(argv)
    info = standalone.status(args.address, args.token, _tls_arg(args))
    if args.json:
        print(json.dumps(info, indent=1, sort_keys=True))
        return 0
    print(f"cluster at {info['address']}: {sum(n['alive'] for n in info['nodes'])} node(s) alive")
    for n in info["nodes"]:
        res = ", ".join(f"{k} {n['resources_free'].get(k, 0):g}/{v:g}"
                        for k, v in sorted(n["resources_total"].items())
                        if k not in ("memory", "object_store_memory"))
        used = n["object_store_used"] / 2**20
        cap = n["object_store_capacity"] / 2**20
        print(f"  node {n['node_id']}  {'alive' if n['alive'] else 'DEAD '}  {n['address']}  "
              f"pid {n['pid']}  workers {n['workers']}  free/total: {res}  "
              f"store {used:.1f}/{cap:.0f} MiB")
        if args.verbose:
            print(f"    tasks {n['tasks']}  actors {n['actors']}  objects {n['objects']}")
    return 0


def _remote_command(command: str, argv: list[str]) -> int:
    import argparse

    from nbdist.exceptions import ClusterError

    if command == "_ssh-host":
        from nbdist.cluster import ssh_host

        return ssh_host.main(argv)
    from nbdist.cluster import cluster_file, remote

    what = {"up": "Start a head and nodes on the machines of a cluster file over SSH (Ray's "
                  "on-premise cluster config: cluster_name, provider.head_ip/worker_ips, auth); "
                  "they keep running until `nbdist down` with the same file.",
            "down": "Stop what `nbdist up` started with this cluster file, on every host."}
    parser = argparse.ArgumentParser(prog=f"nbdist {command}", description=what[command])
    parser.add_argument("cluster_file", metavar="CLUSTER.yaml")
    args = parser.parse_args(argv)
    try:
        spec = cluster_file.load(args.cluster_file)
        if spec.ignored:
            print(f"nbdist {command}: not used by nbdist (ignored): {', '.join(spec.ignored)}")
        print(f"cluster {spec.name!r}: head {spec.head}, workers "
              f"{', '.join(spec.workers) or 'none'}", flush=True)
        if command == "down":
            remote.down(spec)
            print(f"cluster {spec.name!r} is down: nothing of it runs on its hosts.")
            return 0
        cluster = remote.up(spec)
    except (ClusterError, ValueError) as exc:
        print(f"nbdist {command}: {exc}", file=sys.stderr)
        return 1
    print(f"\ncluster {spec.name!r} is up: head at {cluster.address}, {len(spec.hosts)} "
          f"node(s); its token and TLS files are in {cluster.folder}\n"
          f"    nbdist status --address {cluster.address}\n"
          f"    nbdist.cluster.attach({args.cluster_file!r})   # a driver on this machine\n"
          f"    nbdist down {args.cluster_file}")
    return 0


def _install_kernel(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="nbdist install-kernel",
        description="Install a Jupyter kernelspec that loads nbdist's extension at start.")
    parser.add_argument("--name", default="nbdist", help="kernelspec name (default: nbdist)")
    parser.add_argument("--display-name", default="Python 3 (nbdist)",
                        help='name shown in Jupyter (default: "Python 3 (nbdist)")')
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true",
                       help="install for the current user (the default)")
    where.add_argument("--sys-prefix", action="store_true",
                       help="install into this Python environment (sys.prefix)")
    where.add_argument("--prefix", help="install under this prefix")
    args = parser.parse_args(argv)
    from nbdist.jupyter import kernelspec

    prefix = sys.prefix if args.sys_prefix else args.prefix
    path = kernelspec.install(args.name, args.display_name, user=prefix is None, prefix=prefix)
    print(f"installed kernelspec {args.name!r} ({args.display_name}) in {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
