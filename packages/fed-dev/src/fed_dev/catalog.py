"""fed's Iceberg REST catalog (``fed serve``) on loopback, in a thread of this process, for
tests, benchmarks and demos: the same application the command serves, on uvicorn."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from types import TracebackType

from fed_dev.process import free_port
from fedcore.catalog.rest import Access, ServedTable, Warehouse, catalog_app


class ServedCatalog:
    """``start()`` (or a with-block) serves ``tables`` and those in ``warehouse`` on 127.0.0.1
    at ``port`` (a free one unless given: an engine configured before the catalog starts
    knows where it will be)."""

    def __init__(
        self,
        tables: Sequence[ServedTable] = (),
        access: Access | None = None,
        port: int | None = None,
        warehouse: Warehouse | None = None,
    ) -> None:
        import uvicorn  # fedcore[serve]: needed only here

        self.port = port or free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            catalog_app(tables, access, warehouse), host="127.0.0.1", port=self.port, log_level="error"
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 10.0) -> ServedCatalog:
        self._thread = threading.Thread(target=self._server.run, name="fed-serve", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"fed's REST catalog did not start on port {self.port}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> ServedCatalog:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()
