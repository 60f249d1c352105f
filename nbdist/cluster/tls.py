"""TLS material for a cluster started by ``nbdist up`` (layer L3).

One self-signed CA per cluster, made on the notebook's machine with the ``openssl`` command,
signs one certificate per host (its address as subjectAltName) and one for the driver. Every
daemon and driver presents its certificate and accepts only peers with one signed by this CA
(see `nbdist.wire.transport.configure_tls`). The CA's private key never leaves the notebook's
machine; a host receives only its own key, its certificate and the CA certificate, over SSH.

Files (in the cluster's folder, mode 0700; keys mode 0600)::

    ca.pem  ca.key                  the cluster's CA
    <name>.pem  <name>.key          a member: "driver", or "host-<address>"
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import shutil
import subprocess
from pathlib import Path

from nbdist.exceptions import ClusterError

DAYS = 3650


def _openssl(*args: str, cwd: Path) -> None:
    if shutil.which("openssl") is None:
        raise ClusterError("nbdist up makes the cluster's TLS certificates with the `openssl` "
                           "command, which is not on PATH here: install OpenSSL (e.g. "
                           "`apt-get install openssl`).")
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60)
    if done.returncode != 0:
        raise ClusterError(f"openssl {args[0]} failed making the cluster's TLS material in "
                           f"{cwd}: {done.stderr.strip()[-500:]}")


def _new_key(folder: Path, name: str) -> None:
    # Made with umask 077: the key is never readable by others, not even for a moment.
    old = os.umask(0o077)
    try:
        _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                 "-out", f"{name}.key", cwd=folder)
    finally:
        os.umask(old)


def make_ca(folder: Path, cluster: str) -> None:
    """``ca.pem`` and ``ca.key`` in ``folder``."""
    _new_key(folder, "ca")
    _openssl("req", "-x509", "-new", "-key", "ca.key", "-out", "ca.pem", "-days", str(DAYS),
             "-subj", f"/CN=nbdist cluster {cluster} CA", "-addext",
             "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
             cwd=folder)


def member_name(host: str | None) -> str:
    return "driver" if host is None else f"host-{host}"


def make_member(folder: Path, host: str | None) -> tuple[Path, Path]:
    """A key and a certificate signed by the folder's CA for ``host`` (None: the driver);
    returns (certificate, key)."""
    name = member_name(host)
    _new_key(folder, name)
    if host is None:
        alt = "DNS:nbdist-driver"
    else:
        try:
            alt = f"IP:{ipaddress.ip_address(host)}"
        except ValueError:
            alt = f"DNS:{host}"
    ext = folder / f"{name}.ext"
    ext.write_text(f"subjectAltName={alt}\nbasicConstraints=CA:FALSE\n"
                   "extendedKeyUsage=serverAuth,clientAuth\n")
    _openssl("req", "-new", "-key", f"{name}.key", "-out", f"{name}.csr",
             "-subj", f"/CN={host or 'nbdist-driver'}", cwd=folder)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-set_serial", str(secrets.randbits(63)), "-days", str(DAYS),
             "-extfile", ext.name, "-out", f"{name}.pem", cwd=folder)
    ext.unlink()
    (folder / f"{name}.csr").unlink()
    return folder / f"{name}.pem", folder / f"{name}.key"


def make_all(folder: Path, cluster: str, hosts: list[str]) -> None:
    """The CA, a certificate per host and the driver's."""
    make_ca(folder, cluster)
    for host in [None, *hosts]:
        make_member(folder, host)
