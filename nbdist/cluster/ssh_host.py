"""The host side of ``nbdist up`` / ``down``: ``nbdist _ssh-host start|stop`` (layer L3).

`nbdist.cluster.remote` runs this over SSH on each host, with the host's own ``nbdist`` (the
version check before made sure it is the notebook's version). Everything of one cluster on one
host lives in one folder, ``<tmp>/nbdist-<uid>/up-<cluster>-<address>`` (mode 0700):

    token, ca.pem, cert.pem, key.pem   received on stdin as a tar stream over SSH (start)
    head-*/ node-*/                    the `standalone` sessions (pids, logs), as `nbdist start`
    spill/                             the node's spill folder

``start --role head`` starts a head and its node listening on the host's address with TLS and
the token; ``start --role node`` a node that joins the head. Both print one JSON line (the
head's address, the node's pid) and exit; the daemons stay. A start that fails stops what it
started and removes the folder. ``stop`` stops every daemon of the folder (their shared memory
goes with them, see `standalone.stop_session`) and removes the folder, spill files included.
``hold`` waits until its stdin ends (the SSH session that runs it is over), then does what
``stop`` does: started from a kernel, a cluster ends with it, also when the kernel is killed.
The folder's address in its name keeps hosts apart when several share a file system.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

from nbdist.exceptions import ClusterError

FILES = ("token", "ca.pem", "cert.pem", "key.pem")


def host_dir(cluster: str, address: str) -> Path:
    return Path(tempfile.gettempdir()) / f"nbdist-{os.getuid()}" / f"up-{cluster}-{address}"


def bundle(files: dict[str, bytes]) -> bytes:
    """The tar stream ``start`` reads on stdin (``files``: name -> content, names of FILES)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o600
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _unbundle(data: bytes, folder: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        for member in tar.getmembers():
            if member.name not in FILES or not member.isfile():
                raise ClusterError(f"Unexpected entry {member.name!r} in the cluster files.")
            src = tar.extractfile(member)
            assert src is not None
            fd = os.open(folder / member.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(src.read())
    missing = [name for name in FILES if not (folder / name).exists()]
    if missing:
        raise ClusterError(f"The cluster files lack {', '.join(missing)}.")


def _use_folder(folder: Path) -> None:
    """Make `standalone` keep its sessions, and the node its spill files, in ``folder``."""
    os.environ["NBDIST_STATE_DIR"] = str(folder)
    os.environ["NBDIST_SPILL_DIR"] = str(folder / "spill")


def _start(args: argparse.Namespace) -> dict[str, object]:
    from nbdist.cluster import standalone

    folder = host_dir(args.cluster, args.ip)
    if folder.exists():
        _use_folder(folder)
        if any(s.alive() for s in standalone.sessions()):
            raise ClusterError(f"{args.ip} already runs a node of cluster {args.cluster!r} "
                               f"(files in {folder}); run `nbdist down` for it first.")
        shutil.rmtree(folder)
    folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.mkdir(mode=0o700)
    try:
        _unbundle(sys.stdin.buffer.read(), folder)
        (folder / "spill").mkdir(mode=0o700)
        _use_folder(folder)
        secret = bytes.fromhex((folder / "token").read_text().strip())
        tls = {"cert": str(folder / "cert.pem"), "key": str(folder / "key.pem"),
               "ca": str(folder / "ca.pem")}
        resources = json.loads(args.resources) if args.resources else None
        common = {"num_cpus": args.num_cpus, "num_gpus": args.num_gpus,
                  "resources": resources, "tls": tls}
        if args.role == "head":
            session = standalone.start_head(args.ip, args.port, secret=secret, **common)
        else:
            session = standalone.start_node(args.head, token=secret.hex(), host=args.ip,
                                            **common)
    except BaseException:
        _stop_folder(folder)
        raise
    return {"head": standalone.display_address(session.head), "node_pid": session.node_pid,
            "pids": session.pids, "folder": str(folder),
            "client": standalone.display_address(session.client) if session.client else ""}


def _stop_folder(folder: Path) -> list[int]:
    from nbdist.cluster import standalone

    stopped: list[int] = []
    if folder.exists():
        _use_folder(folder)
        for session in sorted(standalone.sessions(), key=lambda s: s.role != "node"):
            stopped += standalone.stop_session(session)
        _end_holds(folder)
        shutil.rmtree(folder, ignore_errors=True)
    return stopped


def _end_holds(folder: Path) -> None:
    """End the ``hold`` processes of ``folder`` (a ``down`` from another process than the one
    that ran ``up``): each left its pid as ``hold.<pid>``."""
    import signal

    for mark in folder.glob("hold.*"):
        pid = int(mark.suffix[1:]) if mark.suffix[1:].isdigit() else 0
        if pid <= 0 or pid == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"_ssh-host" not in f.read():
                    continue
            os.kill(pid, signal.SIGTERM)
        except OSError:
            continue


def _hold(folder: Path) -> None:
    """Wait for the end of stdin (the SSH session of the process that ran ``up`` ended, or it
    closed it), then stop the folder's daemons: a cluster that lives with that process."""
    import signal

    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a hung-up session is the signal to stop
    with contextlib.suppress(OSError):
        (folder / f"hold.{os.getpid()}").touch(mode=0o600)
    with contextlib.suppress(OSError):
        print("held", flush=True)  # `up` returns only once every host holds
    while sys.stdin.buffer.read(65536):
        pass
    _stop_folder(folder)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="nbdist _ssh-host",
                                     description="The host side of `nbdist up` / `down`.")
    parser.add_argument("action", choices=["start", "stop", "hold"])
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--ip", required=True, help="this host's address in the cluster file")
    parser.add_argument("--role", choices=["head", "node"], default="node")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--head", default="", help="HOST:PORT of the head (role node)")
    parser.add_argument("--num-cpus", type=float)
    parser.add_argument("--num-gpus", type=float)
    parser.add_argument("--resources", default="")
    args = parser.parse_args(argv)
    try:
        if args.action == "start":
            out = _start(args)
        elif args.action == "hold":
            _hold(host_dir(args.cluster, args.ip))
            return 0
        else:
            folder = host_dir(args.cluster, args.ip)
            out = {"found": folder.exists(), "stopped": _stop_folder(folder)}
    except (ClusterError, ValueError, OSError) as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(out), flush=True)
    return 0
