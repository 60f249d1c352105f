"""Thin drivers: ``nbdist.init("nbdist://HOST:PORT")`` from a process that runs no node and
finds nothing of the cluster on its machine (an empty state directory): the token and the TLS
files come from the environment, as on a laptop. One cluster with TLS (a CA, certificates
required) serves the whole module; each driver is a separate process.

A dropped connection is simulated by a TCP forwarder between the driver and the client server
that cuts every connection through it (both sockets closed), as a NAT or a Wi-Fi change does;
the driver redials through it and both sides replay what the other missed.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from clusters import Cli
from polling import until
from test_security import _certs

pytestmark = [pytest.mark.timeout(240), pytest.mark.nbdist_only]

GRACE_S = 4  # the client server's reconnect grace period in this module


class Thin:
    """The module's cluster, and how to run a thin driver against it."""

    def __init__(self, cli: Cli, address: str, env: dict[str, str]) -> None:
        self.cli = cli
        self.address = address  # nbdist://HOST:PORT
        self.env = env

    def script(self, code: str, address: str | None = None) -> str:
        return textwrap.dedent(f"""
            import nbdist
            nbdist.init({(address or self.address)!r})
        """) + textwrap.dedent(code)

    def run(self, code: str, address: str | None = None, timeout: float = 120,
            ) -> subprocess.CompletedProcess[str]:
        return self.cli.python(self.script(code, address), env=self.env, timeout=timeout)

    def spawn(self, code: str, address: str | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-c", self.script(code, address)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**self.cli.env, **self.env})


@pytest.fixture(scope="module")
def thin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Thin]:
    tmp = tmp_path_factory.mktemp("thin")
    cli = Cli(tmp / "state")
    cert, key = _certs(tmp, "member")
    ca = str(tmp / "ca.pem")
    try:
        out = cli.run("start", "--head", "--port", "0", "--num-cpus", "2", "--tls-cert", cert,
                      "--tls-key", key, "--tls-ca", ca,
                      env={"NBDIST_CLIENT_RECONNECT_GRACE_PERIOD": str(GRACE_S)}).stdout
        line = next(x for x in out.splitlines() if "nbdist.init(\"nbdist://" in x)
        address = line.split('"')[1]
        (token_file,) = cli.state.glob("head-*/token")
        empty = tmp / "elsewhere"  # the driver's machine knows nothing of the cluster
        empty.mkdir()
        env = {"NBDIST_STATE_DIR": str(empty), "NBDIST_TOKEN": token_file.read_text().strip(),
               "NBDIST_TLS_CERT": cert, "NBDIST_TLS_KEY": key, "NBDIST_TLS_CA": ca}
        yield Thin(cli, address, env)
    finally:
        cli.stop_all()


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return done.stdout


def test_the_api_through_a_thin_driver(thin: Thin) -> None:
    out = _ok(thin.run("""
        import numpy as np
        from nbdist import events
        from nbdist.driver import runtime
        from nbdist.util.placement_group import placement_group, remove_placement_group
        from nbdist.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        client = runtime.current()
        assert client.info["thin"] and client.arena is None and client.direct is None
        from polling import until
        seen = []
        events.subscribe(seen.extend)

        @nbdist.remote
        def add(a, b):
            return a + b

        @nbdist.remote
        def total(arr):
            return float(arr.sum())

        @nbdist.remote
        def ones(n):
            return np.ones(n)

        @nbdist.remote
        def nested():
            return [add.remote(1, 2)]  # a ref made on the cluster, read by the driver

        @nbdist.remote
        def count(n):
            for i in range(n):
                yield i

        @nbdist.remote
        class Counter:
            def __init__(self):
                self.n = 0
            def inc(self, k=1):
                self.n += k
                return self.n

        assert nbdist.get(add.remote(1, 2)) == 3
        big = np.arange(3_000_000, dtype=np.float64)  # 24 MB each way
        ref = nbdist.put(big)
        assert nbdist.get(total.remote(ref)) == float(big.sum())
        back = nbdist.get(ref)
        assert back.shape == big.shape and (back == big).all()
        assert float(nbdist.get(ones.remote(2_000_000)).sum()) == 2_000_000.0
        assert nbdist.get(nbdist.get(nested.remote())[0]) == 3

        @nbdist.remote
        def nested_big():
            return [ones.remote(2_000_000)]

        inner = nbdist.get(nested_big.remote())[0]  # a ref this driver did not submit
        assert nbdist.wait([inner], timeout=60)[0] == [inner]
        assert client.cached(inner.id)[1] is None  # ready, and not a byte of it moved yet
        assert float(nbdist.get(inner).sum()) == 2_000_000.0
        assert list(nbdist.get(list(count.options(num_returns="streaming").remote(4)))) == [
            0, 1, 2, 3]
        c = Counter.options(name="thin-counter").remote()
        assert nbdist.get([c.inc.remote() for _ in range(5)]) == [1, 2, 3, 4, 5]
        assert nbdist.get(nbdist.get_actor("thin-counter").inc.remote(10)) == 15
        ready, rest = nbdist.wait([add.remote(i, i) for i in range(20)], num_returns=20,
                                  timeout=60)
        assert len(ready) == 20 and not rest
        assert sorted(nbdist.get(ready)) == sorted(2 * i for i in range(20))

        pg = placement_group([{"CPU": 1}])
        nbdist.get(pg.ready(), timeout=60)
        strategy = PlacementGroupSchedulingStrategy(placement_group=pg)
        assert nbdist.get(add.options(scheduling_strategy=strategy).remote(2, 3)) == 5
        remove_placement_group(pg)

        import os, tempfile
        running = os.path.join(tempfile.mkdtemp(), "running")

        @nbdist.remote
        def forever(flag):
            import time
            open(flag, "w").close()
            while True:
                time.sleep(0.05)

        stuck = forever.remote(running)
        until(lambda: os.path.exists(running), timeout=60)
        nbdist.cancel(stuck)
        try:
            nbdist.get(stuck, timeout=60)
        except nbdist.exceptions.TaskCancelledError:
            print("cancelled")
        assert nbdist.cluster_resources()["CPU"] == 2

        here = tempfile.mkdtemp()  # a folder of the driver's machine, shipped by the driver
        with open(os.path.join(here, "thin_helper.py"), "w") as f:
            f.write("VALUE = 'from the driver'\\n")

        @nbdist.remote(runtime_env={"working_dir": here})
        def helper():
            import thin_helper
            return thin_helper.VALUE

        assert nbdist.get(helper.remote()) == "from the driver"
        def names():
            return {getattr(e, "name", None) for e in list(seen)}
        until(lambda: {"add", "total", "nested"} <= names(), timeout=60)
        assert any("inc" in str(n) for n in names()), names()
        print("OK")
    """))
    assert "cancelled" in out and "OK" in out


def test_ray_client_form_with_import_nbdist_as_ray(thin: Thin) -> None:
    ray_address = thin.address.replace("nbdist://", "ray://")
    out = _ok(thin.cli.python(f"""
        import nbdist as ray
        ray.init({ray_address!r})

        @ray.remote
        def square(x):
            return x * x

        print(sum(ray.get([square.remote(i) for i in range(100)])))
        ray.shutdown()
    """, env=thin.env))
    assert out.strip() == str(sum(i * i for i in range(100)))


def test_drivers_see_their_own_work_and_a_vanished_one_is_cleaned_up(thin: Thin,
                                                                       tmp_path: Path) -> None:
    flag = tmp_path / "started"
    # A driver that leaves work running and is killed: no goodbye, no reconnection.
    gone = thin.spawn(f"""
        import time

        @nbdist.remote
        class Holder:
            def pid(self):
                import os
                return os.getpid()

        @nbdist.remote
        def a_task():
            import time
            open({str(flag)!r}, "w").close()
            while True:
                time.sleep(0.05)

        h = Holder.remote()
        print(nbdist.get(h.pid.remote()), flush=True)
        a_task.remote()
        time.sleep(600)  # deliberate sleep: this driver stays until the test kills it
    """)
    assert gone.stdout is not None
    actor_pid = int(gone.stdout.readline())
    until(flag.exists, timeout=60)
    # Another thin driver meanwhile: its events are of its own work only.
    out = _ok(thin.run("""
        from nbdist import events
        from polling import until
        seen = []
        events.subscribe(seen.extend)

        @nbdist.remote
        def b_task(x):
            return x

        assert nbdist.get([b_task.remote(i) for i in range(10)]) == list(range(10))
        until(lambda: sum(e.kind == "task_finished" for e in list(seen)) >= 10, timeout=60)
        names = {getattr(e, "name", None) for e in seen} - {None}
        assert names == {"b_task"}, names
        print("OK")
    """))
    assert "OK" in out
    gone.send_signal(signal.SIGKILL)
    gone.wait(30)
    # After the grace period its actor and its running task are gone from the cluster.
    until(lambda: not _alive(actor_pid), timeout=60)
    until(lambda: thin.cli.status("--address", _head(thin))["nodes"][0]["tasks"] == 0,
          timeout=60)
    assert "did not come back within" in _client_log(thin)


def test_a_dropped_connection_is_resumed(thin: Thin, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    with Forwarder(thin.address) as fwd:
        driver = thin.spawn(f"""
            import numpy as np
            from polling import until

            @nbdist.remote
            def later(n):
                until(lambda: __import__("os").path.exists({str(gate)!r}), timeout=120)
                return np.ones(n)

            ref = later.remote(1_000_000)
            big = nbdist.put(np.arange(1_000_000, dtype=np.float64))
            print("submitted", flush=True)
            value = nbdist.get(ref, timeout=120)
            back = nbdist.get(big)
            from nbdist.driver import runtime
            print("done", float(value.sum()), float(back.sum()),
                  runtime.current().conn.reconnects, flush=True)
        """, address=f"nbdist://127.0.0.1:{fwd.port}")
        assert driver.stdout is not None
        assert driver.stdout.readline().strip() == "submitted"
        fwd.cut()  # every connection through it: the driver's reader notices and redials
        until(lambda: fwd.accepted >= 2, timeout=60)
        gate.touch()
        out, err = driver.communicate(timeout=120)
    assert driver.returncode == 0, err
    words = out.split()
    assert words[:3] == ["done", "1000000.0", str(float(sum(range(1_000_000))))], out
    assert int(words[3]) >= 1


# ------------------------------------------------------------------------------ helpers
def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _head(thin: Thin) -> str:
    return thin.cli.status()["address"]


def _client_log(thin: Thin) -> str:
    return "\n".join(p.read_text(errors="replace") for p in thin.cli.state.glob("*/client.log"))


class Forwarder:
    """A TCP forwarder to the client server whose connections the test can cut."""

    def __init__(self, address: str) -> None:
        host, port = address.split("://", 1)[1].rsplit(":", 1)
        self.target = (host, int(port))
        self.lsock = socket.create_server(("127.0.0.1", 0))
        self.port = self.lsock.getsockname()[1]
        self.pairs: list[tuple[socket.socket, socket.socket]] = []
        self.accepted = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                a, _ = self.lsock.accept()
            except OSError:
                return
            b = socket.create_connection(self.target)
            with self.lock:
                self.pairs.append((a, b))
                self.accepted += 1
            for src, dst in ((a, b), (b, a)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(1 << 16):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        with self.lock:
            pairs, self.pairs = self.pairs, []
        for a, b in pairs:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def __enter__(self) -> Forwarder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.lsock.close()
        self.cut()


def test_the_libraries_through_a_thin_driver(thin: Thin, tmp_path: Path) -> None:
    """nbdist.tune (trial actors, reports, a scheduler's decisions) and nbdist.data (tasks on
    Arrow blocks, an aggregate) driven through the one TLS connection."""
    out = _ok(thin.run(f"""
        from nbdist import data, tune

        def objective(config):
            for step in range(3):
                tune.report({{"score": (config["x"] - 2) ** 2 + step}})

        grid = tune.Tuner(objective, param_space={{"x": tune.grid_search([1, 2, 3])}},
                          tune_config=tune.TuneConfig(metric="score", mode="min"),
                          run_config=tune.RunConfig(storage_path={str(tmp_path)!r},
                                                    verbose=0)).fit()
        best = grid.get_best_result()
        print("TUNE", len(grid), best.config["x"], best.metrics["score"])
        ds = data.range(10_000).map_batches(lambda b: {{"sq": b["id"] ** 2}})
        print("DATA", ds.sum("sq"))
        nbdist.shutdown()
    """, timeout=180))
    assert "TUNE 3 2 2" in out, out
    assert f"DATA {sum(i * i for i in range(10_000))}" in out, out
