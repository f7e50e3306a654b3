"""Registering the Iceberg view in a Hive metastore, atomically.

The metastore table is an Iceberg table in the Hive catalog's own form (``table_type=ICEBERG``,
``metadata_location``), so Trino's, Hive's and Spark's Iceberg catalogs find it. Every update
names the metadata location it replaces (``expected_parameter_key`` / ``_value``): the
metastore applies it only if that is still the table's location, so two publishers never
lose an update and a reader sees one version or the next, never a mix. Hive checks that
expectation from 4.0 on (HIVE-26882). An older metastore (2.3, 3.1) would apply any update
blindly, so there each update is made under the table's metastore lock, as Iceberg's own
``HiveCatalog`` commits: take an exclusive lock on the table, read what it holds, alter it,
release the lock. A lock a dead publisher left is waited out until the metastore expires it
(``hive.txn.timeout``, 300 s by default), at most ``LOCK_TIMEOUT_S``, as Iceberg waits
(its ``iceberg.hive.lock-timeout-ms``).

An entry registered for Hive (``hive=True``) takes the form Iceberg's own Hive catalog writes
with ``engine.hive.enabled``: Iceberg's storage handler, SerDe and input/output formats, which
Hive needs to read it and the other engines ignore. Later updates keep that form."""

from __future__ import annotations

import getpass
import socket as sockets
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any, Final
from urllib.parse import urlparse

from hive_metastore.ThriftHiveMetastore import Client
from hive_metastore.ttypes import (
    AlreadyExistsException,
    CheckLockRequest,
    Database,
    EnvironmentContext,
    GetTableRequest,
    LockComponent,
    LockLevel,
    LockRequest,
    LockState,
    LockType,
    MetaException,
    NoSuchObjectException,
    SerDeInfo,
    ShowLocksRequest,
    StorageDescriptor,
    Table,
    UnlockRequest,
)
from pyiceberg.catalog.hive import _construct_hive_storage_descriptor
from pyiceberg.schema import Schema
from thrift.protocol import TBinaryProtocol
from thrift.Thrift import TException
from thrift.transport import TSocket, TTransport

from fedcore.catalog.entry import (
    ATTEMPTS,
    INSTANT_PARAMETER,
    METADATA_LOCATION,
    PREVIOUS_METADATA_LOCATION,
    TABLE_PATH_PARAMETER,
    Registration,
    check_view,
)
from fedcore.exceptions import MetastoreBusyError, MetastoreError

__all__ = [
    "HIVE_STORAGE_HANDLER",
    "INSTANT_PARAMETER",
    "METADATA_LOCATION",
    "STORAGE_HANDLER_PARAMETER",
    "TABLE_PATH_PARAMETER",
    "Metastore",
    "Registration",
]

#: Iceberg's Hive-engine form: the handler Hive opens the table with, and what it names.
STORAGE_HANDLER_PARAMETER = "storage_handler"
HIVE_STORAGE_HANDLER = "org.apache.iceberg.mr.hive.HiveIcebergStorageHandler"
_HIVE_SERDE = "org.apache.iceberg.mr.hive.HiveIcebergSerDe"
_HIVE_INPUT_FORMAT = "org.apache.iceberg.mr.hive.HiveIcebergInputFormat"
_HIVE_OUTPUT_FORMAT = "org.apache.iceberg.mr.hive.HiveIcebergOutputFormat"
#: The metastore must not compute statistics by listing the table's location (its whole
#: ``.hoodie/`` tree: dozens of LISTs per update): the view's files are not under it anyway.
_NO_STATS = {"DO_NOT_UPDATE_STATS": "true"}
#: Seconds a publish waits for a table's lock on a metastore before 4.0 (Iceberg's default).
LOCK_TIMEOUT_S: Final = 180.0
#: Between two checks of a waiting lock: from the first, doubling to the last (Iceberg's).
_LOCK_CHECKS_S: Final = (0.05, 5.0)
#: Metastores asked for their version, by URI (once per process): whether updates there need
#: the table's lock (before 4.0) or carry their expectation (4.0 on).
_NEEDS_LOCKS: dict[str, bool] = {}


class Metastore:
    """A Thrift connection to a Hive metastore (``thrift://host:port``); a with-block."""

    def __init__(self, uri: str, timeout_ms: int = 30_000, lock_timeout_s: float = LOCK_TIMEOUT_S) -> None:
        parsed = urlparse(uri)
        if parsed.scheme != "thrift" or not parsed.hostname or not parsed.port:
            raise MetastoreError(f"metastore URI {uri!r} is not thrift://HOST:PORT")
        self.uri = uri
        self.lock_timeout_s = lock_timeout_s
        self._needs_locks = False
        socket = TSocket.TSocket(parsed.hostname, parsed.port)
        socket.setTimeout(timeout_ms)
        self._transport = TTransport.TBufferedTransport(socket)
        self._client = Client(TBinaryProtocol.TBinaryProtocol(self._transport))

    def __enter__(self) -> Metastore:
        try:
            self._transport.open()
        except TException as exc:
            raise MetastoreError(f"cannot reach the metastore at {self.uri}: {exc}") from exc
        try:
            self._check_version()
        except BaseException:
            self._transport.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._transport.close()

    def _check_version(self) -> None:
        if self.uri in _NEEDS_LOCKS:
            self._needs_locks = _NEEDS_LOCKS[self.uri]
            return
        try:
            version = str(self._client.getVersion())
        except TException as exc:
            raise MetastoreError(f"the metastore at {self.uri} does not say its version ({exc})") from exc
        major = version.split(".", 1)[0]
        # Hive 2.3 and 3.x both answer "3.0"; 4.0 on answer their own version. The 4.0.0 alphas
        # came before the expected-location check (HIVE-26882).
        self._needs_locks = not major.isdigit() or int(major) < 4 or "alpha" in version
        _NEEDS_LOCKS[self.uri] = self._needs_locks

    def parameters(self, database: str, table: str) -> dict[str, str] | None:
        """The parameters of ``database.table`` (None: no such table)."""
        found = self._table(database, table)
        return None if found is None else dict(found.parameters or {})

    def fed_tables(self, database: str) -> dict[str, str]:
        """The fed views registered in ``database``: metastore table name -> fed table path."""
        try:
            names = self._client.get_all_tables(database)
        except NoSuchObjectException:
            return {}
        except TException as exc:
            raise MetastoreError(
                f"the metastore at {self.uri} failed to list database {database}: {exc}"
            ) from exc
        out = {}
        for name in names:
            params = self.parameters(database, name) or {}
            if params.get(TABLE_PATH_PARAMETER):
                out[name] = params[TABLE_PATH_PARAMETER]
        return out

    def register(
        self,
        database: str,
        table: str,
        *,
        table_path: str,
        schema: Schema,
        metadata_location: str,
        instant: str | None,
        is_newer: Any,
        hive: bool = False,
    ) -> Registration:
        """Make ``database.table`` point at ``metadata_location``, replacing whatever location it
        held, unless that one is newer (``is_newer(held)``: another publisher got further).
        ``hive``: in Iceberg's Hive-engine form (kept once there, whatever later callers say)."""
        for _ in range(ATTEMPTS):
            with self._locked(database, table):
                done = self._attempt(
                    database, table, table_path, schema, metadata_location, instant, is_newer, hive
                )
            if done is not None:
                return done
        raise MetastoreError(
            f"{database}.{table} in the metastore at {self.uri} kept moving under {ATTEMPTS} attempts "
            "to update it"
        )

    def _attempt(
        self,
        database: str,
        table: str,
        table_path: str,
        schema: Schema,
        metadata_location: str,
        instant: str | None,
        is_newer: Any,
        hive: bool,
    ) -> Registration | None:
        """One try at ``register``; None: another publisher got in first (look again)."""
        found = self._table(database, table)
        if found is None:
            self._ensure_database(database)
            if self._create(database, table, table_path, schema, metadata_location, instant, hive):
                return Registration(database, table, metadata_location, True)
            return None  # created by another publisher meanwhile: update theirs
        params = dict(found.parameters or {})
        check_view(params, table_path, f"{database}.{table}", f"the metastore at {self.uri}")
        held = params.get(METADATA_LOCATION)
        was_hive = params.get(STORAGE_HANDLER_PARAMETER) == HIVE_STORAGE_HANDLER
        if held == metadata_location or (held is not None and is_newer(held)):
            if was_hive or not hive:
                return Registration(database, table, held or metadata_location, False)
            # Only the form changes: the held (newer) version stays, with its columns.
            found.sd = _hive_form(found.sd)
            found.parameters = {**params, STORAGE_HANDLER_PARAMETER: HIVE_STORAGE_HANDLER}
        else:
            found.sd = _descriptor(schema, table_path, hive or was_hive)
            found.parameters = {
                **params,
                METADATA_LOCATION: metadata_location,
                PREVIOUS_METADATA_LOCATION: held or "",
                INSTANT_PARAMETER: instant or "",
            }
            if hive or was_hive:
                found.parameters[STORAGE_HANDLER_PARAMETER] = HIVE_STORAGE_HANDLER
        context = EnvironmentContext(
            {
                **_NO_STATS,
                "expected_parameter_key": METADATA_LOCATION,
                "expected_parameter_value": held or "",
            }
        )
        try:
            self._client.alter_table_with_environment_context(database, table, found, context)
            return Registration(database, table, found.parameters[METADATA_LOCATION], True)
        except MetaException as exc:
            if "has been modified" not in str(exc.message):
                raise MetastoreError(
                    f"the metastore at {self.uri} refused {database}.{table}: {exc.message}"
                ) from exc
            return None  # another publisher moved it first: look again
        except TException as exc:
            raise MetastoreError(f"the metastore at {self.uri} failed on {database}.{table}: {exc}") from exc

    @contextmanager
    def _locked(self, database: str, table: str) -> Iterator[None]:
        """Hold ``database.table``'s exclusive metastore lock (before Hive 4.0; from 4.0 on, an
        update carries its own expectation and nothing is locked)."""
        if not self._needs_locks:
            yield
            return
        self._ensure_database(database)
        name = f"{database}.{table}"
        component = LockComponent(
            type=LockType.EXCLUSIVE, level=LockLevel.TABLE, dbname=database, tablename=table
        )
        agent = f"fed-{uuid.uuid4()}"  # finds this lock again if the answer to taking it is lost
        request = LockRequest(
            component=[component], user=_user(), hostname=sockets.gethostname(), agentInfo=agent
        )
        try:
            response = self._client.lock(request)
        except TException as exc:
            self._release_lost(database, table, agent)
            raise MetastoreError(f"the metastore at {self.uri} refused to lock {name}: {exc}") from exc
        try:
            state, wait = response.state, _LOCK_CHECKS_S[0]
            deadline = time.monotonic() + self.lock_timeout_s
            while state == LockState.WAITING:  # each check also keeps the waiting lock alive
                if time.monotonic() > deadline:
                    raise MetastoreBusyError(
                        f"{name} in the metastore at {self.uri} stayed locked for "
                        f"{self.lock_timeout_s:.0f} s: another publisher holds its lock (one that "
                        "died holds it until the metastore expires it, after hive.txn.timeout: "
                        "300 s by default)"
                    )
                time.sleep(wait)
                wait = min(wait * 2, _LOCK_CHECKS_S[1])
                state = self._client.check_lock(CheckLockRequest(lockid=response.lockid)).state
            if state != LockState.ACQUIRED:
                said = LockState._VALUES_TO_NAMES.get(state, state)
                raise MetastoreError(f"the metastore at {self.uri} did not lock {name}: {said}")
            yield
        except TException as exc:
            raise MetastoreError(f"the metastore at {self.uri} failed while locking {name}: {exc}") from exc
        finally:
            with suppress(TException):  # the metastore expires a lock nobody heartbeats
                self._client.unlock(UnlockRequest(lockid=response.lockid))

    def _release_lost(self, database: str, table: str, agent: str) -> None:
        """Release the lock ``agent`` may hold though the answer to taking it was lost (else it
        would block every publisher until the metastore expires it)."""
        with suppress(TException):
            found = self._client.show_locks(ShowLocksRequest(dbname=database, tablename=table)).locks or []
            for lock in found:
                if lock.agentInfo == agent:
                    self._client.unlock(UnlockRequest(lockid=lock.lockid))

    def _table(self, database: str, table: str) -> Table | None:
        try:
            found: Table = self._client.get_table_req(GetTableRequest(dbName=database, tblName=table)).table
            return found
        except NoSuchObjectException:
            return None
        except TException as exc:
            raise MetastoreError(
                f"the metastore at {self.uri} failed to look up {database}.{table}: {exc}"
            ) from exc

    def _ensure_database(self, database: str) -> None:
        try:
            self._client.get_database(database)
            return
        except NoSuchObjectException:
            pass
        except TException as exc:
            raise MetastoreError(f"the metastore at {self.uri} failed on database {database}: {exc}") from exc
        try:
            self._client.create_database(Database(name=database, description="fed tables' Iceberg views"))
        except TException as exc:  # another publisher may have created it first
            try:
                self._client.get_database(database)
            except TException:
                raise MetastoreError(
                    f"the metastore at {self.uri} refused to create database {database}: {exc}"
                ) from exc

    def _create(
        self,
        database: str,
        table: str,
        table_path: str,
        schema: Schema,
        location: str,
        instant: str | None,
        hive: bool,
    ) -> bool:
        parameters = {
            "EXTERNAL": "TRUE",
            "table_type": "ICEBERG",
            METADATA_LOCATION: location,
            INSTANT_PARAMETER: instant or "",
            TABLE_PATH_PARAMETER: table_path,
        }
        if hive:
            parameters[STORAGE_HANDLER_PARAMETER] = HIVE_STORAGE_HANDLER
        entry = Table(
            tableName=table,
            dbName=database,
            tableType="EXTERNAL_TABLE",
            sd=_descriptor(schema, table_path, hive),
            parameters=parameters,
        )
        try:
            self._client.create_table_with_environment_context(entry, EnvironmentContext(_NO_STATS))
            return True
        except AlreadyExistsException:
            return False
        except TException as exc:
            if self._table(database, table) is not None:
                return False  # another publisher created it first (some metastores say so this way)
            raise MetastoreError(
                f"the metastore at {self.uri} refused to create {database}.{table}: {exc}"
            ) from exc


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no user name in this environment (a container, say)
        return "fed"


def _descriptor(schema: Schema, table_path: str, hive: bool) -> StorageDescriptor:
    """The entry's columns and location, in the Hive-engine form or PyIceberg's own."""
    descriptor = _construct_hive_storage_descriptor(schema, table_path)
    return _hive_form(descriptor) if hive else descriptor


def _hive_form(descriptor: StorageDescriptor) -> StorageDescriptor:
    descriptor.serdeInfo = SerDeInfo(serializationLib=_HIVE_SERDE)
    descriptor.inputFormat = _HIVE_INPUT_FORMAT
    descriptor.outputFormat = _HIVE_OUTPUT_FORMAT
    return descriptor
