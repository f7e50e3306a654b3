"""A Spark standalone cluster and a Spark Connect server on loopback, from the installed PySpark.

``SparkCluster`` starts a master and a worker (``spark-class``, the JVMs the PySpark wheel
ships); a session on it gets executors in processes of their own, in the worker's folder,
not the driver's working directory. ``ConnectServer`` runs Spark Connect's server as an
application on that cluster (``spark-submit``), for clients of
``SparkSession.builder.remote(...)``. Every process binds 127.0.0.1 and runs this
interpreter's Python (``PYSPARK_PYTHON``) for Spark's Python workers, so they import the
fedcore and fed-spark under test.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from fed_dev.process import ProcessServer, free_ports, listening

#: Executors per application, each of one core: two processes, as a real cluster has several.
EXECUTORS = 2


def spark_home() -> Path:
    """The installed PySpark's folder: its ``bin/`` and ``jars/`` are a Spark distribution."""
    import pyspark

    return Path(pyspark.__file__).parent


#: What would make Spark's launchers or a session here a Spark Connect client instead.
_CONNECT_VARIABLES = ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE", "SPARK_API_MODE")


def spark_env() -> dict[str, str]:
    """The environment Spark's launch scripts need here: loopback, this Python (and none of
    a Connect client's variables: ``spark-submit`` refuses a master beside ``SPARK_REMOTE``)."""
    return {
        **{k: v for k, v in os.environ.items() if k not in _CONNECT_VARIABLES},
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }


def _wait(ready: Callable[[], bool], server: ProcessServer, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout

    def exited() -> bool:
        return server._process is not None and server._process.poll() is not None

    while not ready():
        if exited():
            raise server.failed(f"{what} (it exited)")
        if time.monotonic() > deadline:
            raise server.failed(f"{what} (within {timeout:.0f} s)")
        time.sleep(0.3)
    if exited():  # its port answered, but not for it
        raise server.failed(f"{what} (it exited)")


def _logged(server: ProcessServer, line: str) -> bool:
    """Whether ``server``'s log holds ``line``."""
    return server.log.exists() and line in server.log.read_text(errors="replace")


class _Master(ProcessServer):
    def __init__(self) -> None:
        super().__init__()
        self.port, self.ui_port = free_ports(2)

    def start(self) -> _Master:
        self.spawn(
            [
                str(spark_home() / "bin" / "spark-class"),
                "org.apache.spark.deploy.master.Master",
                *("--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.ui_port)),
            ],
            env=spark_env(),
        )
        # Its own log says so: a port that answers may be another process's.
        started = f"Successfully started service 'sparkMaster' on port {self.port}."
        _wait(lambda: listening(self.port) and _logged(self, started), self, "the Spark master", 60)
        return self


class _Worker(ProcessServer):
    def __init__(self, master: _Master, cores: int, memory: str) -> None:
        super().__init__()
        self.master, self.cores, self.memory = master, cores, memory

    def start(self) -> _Worker:
        (self.folder / "work").mkdir()
        self.spawn(
            [
                str(spark_home() / "bin" / "spark-class"),
                "org.apache.spark.deploy.worker.Worker",
                f"spark://127.0.0.1:{self.master.port}",
                *("--host", "127.0.0.1", "--cores", str(self.cores), "--memory", self.memory),
                *("--work-dir", str(self.folder / "work"), "--webui-port", str(free_ports(1)[0])),
            ],
            env=spark_env(),
        )
        # From the worker's log, not the master's web UI: a CI run once found another page on the
        # UI's port where the master's JSON should have been.
        registered = f"Successfully registered with master spark://127.0.0.1:{self.master.port}"
        _wait(lambda: _logged(self, registered), self, "the Spark worker", 60)
        return self


class SparkCluster:
    """A standalone master and one worker on loopback. ``conf`` is what a session (or the
    Connect server) sets to run on it: two one-core executors of 1 GB each; the worker offers
    twice that, so a second application (a Connect server beside a classic session) gets its
    own executors too."""

    def __init__(self, cores: int = 2 * EXECUTORS, memory: str = "6g") -> None:
        self._master = _Master()
        self._worker = _Worker(self._master, cores, memory)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self._master.port}"

    @property
    def work_dir(self) -> Path:
        """Where the executors run (each application's folder, then each executor's)."""
        return self._worker.folder / "work"

    def conf(self) -> dict[str, str]:
        return {
            "spark.master": self.url,
            "spark.executor.cores": "1",
            "spark.cores.max": str(EXECUTORS),
            "spark.executor.memory": "1g",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        }

    def start(self) -> SparkCluster:
        self._master.start()
        try:
            self._worker.start()
        except BaseException:
            self._master.stop()
            raise
        return self

    def stop(self) -> None:
        try:
            self._worker.stop()  # it stops its executors
        finally:
            self._master.stop()

    def __enter__(self) -> SparkCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ConnectServer(ProcessServer):
    """Spark Connect's server, an application on ``cluster``; ``url`` is what
    ``SparkSession.builder.remote`` takes. ``conf`` adds settings of its own (as
    ``spark-submit --conf`` does), ``env`` variables of its driver's environment (where its
    Python workers run a data source's planning and commits)."""

    def __init__(
        self,
        cluster: SparkCluster,
        conf: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.cluster = cluster
        self.port = free_ports(1)[0]
        self.extra = dict(conf or {})
        self.env = dict(env or {})

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def start(self) -> ConnectServer:
        settings = {
            **self.cluster.conf(),
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.sql.warehouse.dir": str(self.folder / "warehouse"),
            "spark.driver.extraJavaOptions": f"-Dderby.system.home={self.folder}",
            **self.extra,
        }
        command = [
            str(spark_home() / "bin" / "spark-submit"),
            *("--class", "org.apache.spark.sql.connect.service.SparkConnectServer"),
            *(arg for key, value in settings.items() for arg in ("--conf", f"{key}={value}")),
            "spark-internal",
        ]
        self.spawn(command, env={**spark_env(), **self.env})
        _wait(lambda: listening(self.port), self, "the Spark Connect server", 120)
        return self
