"""``fed serve``: a read-only Iceberg REST catalog over fed tables' Iceberg views.

Engines that speak the Iceberg REST catalog protocol (Trino's ``iceberg.catalog.type=rest``,
Spark's ``SparkCatalog`` with ``type=rest``, PyIceberg's ``RestCatalog``) list and load the
tables it was given by name, and those it finds in a warehouse folder
(``WAREHOUSE/NAMESPACE/NAME``). A load publishes the view first when the table has moved on since its
last publish (``fedcore.iceberg.publish``, which returns at once when it has not), so an
engine reads the table's latest commit with no sync step between a write and a read.

It serves what loading needs (config, namespaces, tables, a table's metadata location and
metadata) and refuses every change (``UnsupportedOperationException``): fed tables are
written by fed. Errors follow the spec's error model (``{"error": {"message", "type",
"code"}}``).

It is a network service, so it is safe by default:

- it serves only the tables it was given or found in its warehouse, looked up by name: no
  part of a request ever becomes a path;
- with a token (``token``) or a client credential (``credentials``, exchanged at the spec's
  OAuth2 token endpoint for a token of this process, good for ``TOKEN_LIFETIME_S``) every
  request but the token exchange needs ``Authorization: Bearer``, else 401;
- a request body is at most ``MAX_BODY_BYTES``, a load at most ``LOAD_TIMEOUT_S``;
- no storage credential is served: readers bring their own (the ``config`` of a load is
  empty).

The command (``fedcore.cli``) binds to 127.0.0.1 unless told otherwise, and beyond the
loopback only with a token or a credential.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import parse_qs

from fedcore import properties as P
from fedcore.exceptions import ConfigError, FedError, MissingDependencyError
from fedcore.handle import HasHandle, TableHandle
from fedcore.io.errors import storage_errors
from fedcore.io.filesystems import StorageOptions, filesystem_for
from fedcore.io.uris import normalize_uri

#: Refused requests are logged here (what was asked, by which address, why; never a token).
LOG = logging.getLogger("fedcore.catalog.rest")

try:  # the server stack and PyIceberg are extras: fedcore[serve]
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route
    from starlette.types import ASGIApp, Receive, Scope, Send

    from fedcore.iceberg import publish
except ImportError as exc:  # pragma: no cover - exercised without the extra only
    raise MissingDependencyError(
        f"fed serve needs fedcore[serve]: pip install 'fedcore[serve]' ({exc})"
    ) from exc

#: Bytes a request body may hold (only the token exchange has one: a few form fields).
MAX_BODY_BYTES: Final = 16 * 1024
#: Seconds a load may take (its publish included) before the client is told to retry.
LOAD_TIMEOUT_S: Final = 120.0
#: OAuth2's token exchange grant (RFC 8693), with which clients renew a token.
TOKEN_EXCHANGE: Final = "urn:ietf:params:oauth:grant-type:token-exchange"
#: Seconds a token issued at the token endpoint is good for; how many may be live at once.
TOKEN_LIFETIME_S: Final = 3600.0
MAX_ISSUED_TOKENS: Final = 10_000
#: Namespace levels in a path are joined by the unit separator (the spec's encoding).
LEVELS: Final = "\x1f"
#: The endpoints served, as the config response lists them for clients that read it.
ENDPOINTS: Final = (
    "GET /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
)


#: Seconds between two looks into a warehouse folder: listing or loading a name not seen yet
#: looks again, at most this often.
RESCAN_S: Final = 2.0


@dataclass(frozen=True)
class ServedTable:
    """A table the catalog serves: its namespace (levels) and name, and the table itself."""

    namespace: tuple[str, ...]
    name: str
    table: HasHandle


def parse_served(spec: str) -> tuple[tuple[str, ...], str, str]:
    """``NAMESPACE.NAME=TABLE_URI`` (``fed serve --table``): namespace levels, name, URI. The
    namespace may have several levels (``a.b.trips``); the name is the last part."""
    identifier, sep, uri = spec.partition("=")
    parts = [part.strip() for part in identifier.strip().split(".")]
    if not sep or not uri.strip() or len(parts) < 2 or not all(parts):
        raise ConfigError("--table", f"{spec!r}: expected NAMESPACE.NAME=TABLE_URI")
    if any("/" in part or not part.isprintable() for part in parts):
        raise ConfigError("--table", f"{identifier.strip()!r}: names hold no '/' and no control characters")
    return tuple(parts[:-1]), parts[-1], uri.strip()


@dataclass(frozen=True)
class Warehouse:
    """A folder of fed tables, served by where they lie: the table at ``URI/NAMESPACE/NAME``
    (a folder holding ``.hoodie/hoodie.properties``, or its backup while a writer replaces it)
    is ``NAMESPACE.NAME``. A namespace folder named ``x.db`` is served as ``x``, as Hive's and
    Spark's warehouses name them. Folders starting with ``.`` or ``_`` are not looked into."""

    uri: str
    storage_options: StorageOptions | None = field(default=None, repr=False)  # may hold secrets
    rescan_s: float = RESCAN_S

    def find(self) -> dict[tuple[tuple[str, ...], str], str]:
        """The tables in the folder now: (namespace, name) -> table URI. One listing of the
        folder and one per namespace folder, then one look per candidate; never a listing
        of a table's own files."""
        root = normalize_uri(self.uri)
        fs = filesystem_for(root, self.storage_options)
        fs.invalidate_cache()  # a listing cached by s3fs would hide new tables
        found: dict[tuple[tuple[str, ...], str], str] = {}
        with storage_errors(root):
            for folder in _folders(fs, root):
                namespace = folder.removesuffix(".db") or folder
                for name in _folders(fs, f"{root}/{folder}"):
                    uri = f"{root}/{folder}/{name}"
                    if _holds_table(fs, uri):
                        found.setdefault(((namespace,), name), uri)  # x before x.db: sorted
        return found

    def holds(self, uri: str) -> bool:
        """Whether the table folder ``uri`` (one this warehouse found) still holds a table."""
        fs = filesystem_for(uri, self.storage_options)
        fs.invalidate_cache()
        with storage_errors(uri):
            return _holds_table(fs, uri)


def _holds_table(fs: object, uri: str) -> bool:
    """A table's config, or its backup (Hudi replaces the config by way of a backup)."""
    config = f"{uri}/{P.HOODIE_FOLDER}/{P.PROPERTIES_FILE}"
    return any(fs.exists(path) for path in (config, f"{config}.backup"))  # type: ignore[attr-defined]


def _folders(fs: object, uri: str) -> list[str]:
    """The names of the folders right under ``uri`` that may hold tables."""
    entries = fs.ls(uri, detail=True)  # type: ignore[attr-defined]  # fsspec ships no types
    names = (
        entry["name"].rstrip("/").rsplit("/", 1)[-1] for entry in entries if entry["type"] == "directory"
    )
    return sorted(n for n in names if n and n[0] not in "._" and n.isprintable())


@dataclass(frozen=True)
class Access:
    """Who may call: a static bearer token, client credentials (id -> secret) exchanged at the
    token endpoint, or neither (anyone who reaches the socket)."""

    token: str | None = field(default=None, repr=False)
    credentials: Mapping[str, str] | None = field(default=None, repr=False)

    @property
    def required(self) -> bool:
        return bool(self.token or self.credentials)


class _Catalog:
    def __init__(self, tables: Sequence[ServedTable], access: Access, warehouse: Warehouse | None) -> None:
        #: The tables given by name; those found in the warehouse (their URIs), and opened.
        self.given: dict[tuple[tuple[str, ...], str], ServedTable] = {}
        for served in tables:
            key = (served.namespace, served.name)
            if key in self.given:
                raise ConfigError("--table", f"{'.'.join([*served.namespace, served.name])} is given twice")
            self.given[key] = served
        self.warehouse = warehouse
        self.found: dict[tuple[tuple[str, ...], str], str] = {}
        self.opened: dict[tuple[tuple[str, ...], str], ServedTable] = {}
        self.scanned_at = -float("inf")
        self.state = threading.Lock()  # guards found, opened, scanned_at and locks
        self.scanning = threading.Lock()  # one look into the warehouse at a time
        self.locks: dict[tuple[tuple[str, ...], str], threading.Lock] = {}
        self.access = access
        #: Tokens this process issued at the token endpoint, and when each expires.
        self.issued: dict[str, float] = {}
        if warehouse is not None:
            self.rescan(force=True)
            for key, uri in self.found.items():
                if key in self.given:
                    raise ConfigError(
                        "--table",
                        f"{'.'.join([*key[0], key[1]])} is given and also found in the warehouse at {uri}",
                    )

    # --- what is served ---------------------------------------------------------------------

    def rescan(self, force: bool = False) -> None:
        """Look into the warehouse again, unless it was looked into less than its
        ``rescan_s`` ago. Tables found gone are no longer served."""
        if self.warehouse is None:
            return
        with self.scanning:  # a caller that waited for a look uses it
            if not force and time.monotonic() - self.scanned_at < self.warehouse.rescan_s:
                return
            found = self.warehouse.find()
            with self.state:
                self.found = found
                self.scanned_at = time.monotonic()
                self.opened = {
                    key: t for key, t in self.opened.items() if found.get(key) == t.table.handle.path
                }

    def forget_if_gone(self, key: tuple[tuple[str, ...], str]) -> bool:
        """Whether the warehouse table ``key`` is gone (its folder asked alone: a load of it
        failed); a gone table is no longer served."""
        with self.state:
            uri = self.found.get(key)
        if uri is None or self.warehouse is None:
            return True
        if self.warehouse.holds(uri):
            return False
        with self.state:
            if self.found.get(key) == uri:
                self.found = {k: v for k, v in self.found.items() if k != key}
                self.opened.pop(key, None)
        return True

    def keys(self) -> set[tuple[tuple[str, ...], str]]:
        return {*self.given, *self.found}

    def namespaces(self) -> list[tuple[str, ...]]:
        return sorted({namespace for namespace, _ in self.keys()})

    def served(self, key: tuple[tuple[str, ...], str]) -> ServedTable | None:
        """The table served as ``key``, opened on its first load (a warehouse's)."""
        if key in self.given:
            return self.given[key]
        with self.state:
            uri = self.found.get(key)
            opened = self.opened.get(key)
        if uri is None:
            return None
        if opened is None:
            opened = ServedTable(key[0], key[1], TableHandle.open(uri, self.warehouse_options))
            with self.state:
                opened = self.opened.setdefault(key, opened)
        return opened

    @property
    def warehouse_options(self) -> StorageOptions | None:
        return None if self.warehouse is None else self.warehouse.storage_options

    def lock(self, key: tuple[tuple[str, ...], str]) -> threading.Lock:
        with self.state:
            return self.locks.setdefault(key, threading.Lock())

    # --- access ------------------------------------------------------------------------------

    def authorized(self, request: Request) -> bool:
        if not self.access.required:
            return True
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not given:
            return False
        return self.valid(given)

    def valid(self, token: str) -> bool:
        """``token`` is the configured one, or one this process issued that is still live
        (compared as bytes: a header may carry any byte)."""
        if self.access.token is not None and hmac.compare_digest(token.encode(), self.access.token.encode()):
            return True
        return self.issued.get(token, 0.0) > time.monotonic()

    async def token(self, request: Request) -> Response:
        """The spec's OAuth2 token endpoint: client credentials for a bearer token."""
        body = await _body(request)
        if body is None:
            return _error(413, "BadRequestException", f"request bodies are at most {MAX_BODY_BYTES} bytes")
        form = {k: v[-1] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
        grant = form.get("grant_type")
        if grant == "client_credentials":
            client, secret = form.get("client_id", ""), form.get("client_secret", "")
            known = (self.access.credentials or {}).get(client)
            if known is None or not hmac.compare_digest(secret.encode(), known.encode()):
                return _oauth_error(401, "invalid_client", "unknown client or wrong secret")
        elif grant == TOKEN_EXCHANGE:
            # Iceberg's Java client renews its token before it expires by exchanging it.
            if not self.valid(form.get("subject_token", "")):
                return _oauth_error(
                    401, "invalid_grant", "the subject token is not a live token of this catalog"
                )
        else:
            return _oauth_error(400, "unsupported_grant_type", "client_credentials or token exchange only")
        now = time.monotonic()
        for old in [t for t, expiry in self.issued.items() if expiry <= now]:
            del self.issued[old]
        while len(self.issued) >= MAX_ISSUED_TOKENS:  # the oldest go first
            del self.issued[next(iter(self.issued))]
        issued = secrets.token_urlsafe(32)
        self.issued[issued] = now + TOKEN_LIFETIME_S
        return JSONResponse(
            {
                "access_token": issued,
                "token_type": "bearer",
                "expires_in": int(TOKEN_LIFETIME_S),
                "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
            }
        )

    # --- reads -------------------------------------------------------------------------------

    def known(self, levels: tuple[str, ...]) -> bool:
        """A namespace is served when a served table's namespace is it or within it."""
        return any(ns[: len(levels)] == levels for ns in self.namespaces())

    async def look(self) -> Response | None:
        """Look into the warehouse again if it is due (off the event loop, within a bound); an
        error response when storage failed or took too long. Listings answer from the last
        look then (they never depend on the warehouse more than that look did); a name not
        known yet gets the error."""
        if self.warehouse is None:
            return None
        try:
            await asyncio.wait_for(run_in_threadpool(self.rescan), LOAD_TIMEOUT_S)
        except asyncio.TimeoutError:
            return _error(
                503, "ServiceUnavailableException", f"the warehouse took over {LOAD_TIMEOUT_S:.0f} s"
            )
        except FedError as exc:
            return _error(503, "ServiceUnavailableException", f"cannot look into the warehouse: {exc}")
        return None

    async def still_there(self, key: tuple[tuple[str, ...], str]) -> bool:
        """Whether the warehouse still holds ``key`` (a load of it failed)."""
        try:
            return not await run_in_threadpool(self.forget_if_gone, key)
        except FedError:
            return True  # storage failing: the load's own error says more

    async def config(self, request: Request) -> Response:
        return JSONResponse({"defaults": {}, "overrides": {}, "endpoints": list(ENDPOINTS)})

    async def list_namespaces(self, request: Request) -> Response:
        parent = _levels(request.query_params.get("parent", ""))
        await self.look()  # on failure: the last look's namespaces
        depth = len(parent)
        children = sorted(
            {ns[: depth + 1] for ns in self.namespaces() if len(ns) > depth and ns[:depth] == parent}
        )
        if parent and not self.known(parent):
            return _no_namespace(parent)
        return JSONResponse({"namespaces": [list(ns) for ns in children]})

    async def namespace(self, request: Request) -> Response:
        levels = _levels(request.path_params["namespace"])
        if not self.known(levels) and (failed := await self.look()):
            return failed
        if not self.known(levels):
            return _no_namespace(levels)
        if request.method == "HEAD":
            return Response(status_code=204)
        return JSONResponse({"namespace": list(levels), "properties": {}})

    async def list_tables(self, request: Request) -> Response:
        levels = _levels(request.path_params["namespace"])
        failed = await self.look()  # on failure: the last look's tables
        if not self.known(levels):
            return failed or _no_namespace(levels)
        names = sorted(name for ns, name in self.keys() if ns == levels)
        return JSONResponse({"identifiers": [{"namespace": list(levels), "name": n} for n in names]})

    async def load_table(self, request: Request) -> Response:
        levels = _levels(request.path_params["namespace"])
        name = request.path_params["table"]
        key = (levels, name)
        if key not in self.keys() and (failed := await self.look()):
            return failed
        if key not in self.keys():
            return _error(404, "NoSuchTableException", f"table does not exist: {'.'.join([*levels, name])}")
        if request.method == "HEAD":
            return Response(status_code=204)
        try:  # opening and publishing read and write storage: off the event loop, within a bound
            body = await asyncio.wait_for(run_in_threadpool(self._load, key), LOAD_TIMEOUT_S)
        except asyncio.TimeoutError:  # (not the builtin TimeoutError before Python 3.11)
            return _error(503, "ServiceUnavailableException", f"loading took over {LOAD_TIMEOUT_S:.0f} s")
        except FedError as exc:
            if key not in self.given and not await self.still_there(key):
                return _error(404, "NoSuchTableException", f"table {'.'.join([*levels, name])} is gone")
            return _error(500, "ServerErrorException", str(exc))
        if body is None:
            return _error(
                404, "NoSuchTableException", f"table {'.'.join([*levels, name])} has no commit to show yet"
            )
        return Response(body, media_type="application/json")

    def _load(self, key: tuple[tuple[str, ...], str]) -> str | None:
        """The LoadTableResult of the table served as ``key``, published first where it moved
        on; None: it has no commit to show (or is gone from the warehouse). One load of a
        table at a time: they share its handle and caches, and a second would find the
        first's publish done."""
        with self.lock(key):
            served = self.served(key)
            if served is None:
                return None
            result = publish(served.table)
        if result.metadata is None or result.metadata_location is None:
            return None
        return (
            f'{{"metadata-location": {json.dumps(result.metadata_location)}, '
            f'"metadata": {result.metadata.model_dump_json()}, "config": {{}}}}'
        )

    async def refuse(self, request: Request) -> Response:
        if request.method in ("GET", "HEAD"):
            return await _not_found(request, HTTPException(404))
        return _error(
            406, "UnsupportedOperationException", "this catalog is read-only: fed tables are written by fed"
        )


def catalog_app(
    tables: Sequence[ServedTable] = (), access: Access | None = None, warehouse: Warehouse | None = None
) -> ASGIApp:
    """The ASGI application serving ``tables`` and those in ``warehouse`` under ``access``
    (the warehouse is looked into here first: a storage error is raised here)."""
    catalog = _Catalog(tables, access or Access(), warehouse)
    reads = ["GET", "HEAD"]
    writes = ["POST", "PUT", "DELETE"]
    routes = [
        Route("/v1/config", catalog.config, methods=["GET"]),
        Route("/v1/oauth/tokens", catalog.token, methods=["POST"]),
        Route("/v1/namespaces", catalog.list_namespaces, methods=["GET"]),
        Route("/v1/namespaces", catalog.refuse, methods=writes),
        Route("/v1/namespaces/{namespace}", catalog.namespace, methods=reads),
        Route("/v1/namespaces/{namespace}/tables", catalog.list_tables, methods=["GET"]),
        Route("/v1/namespaces/{namespace}/tables/{table}", catalog.load_table, methods=reads),
        Route("/v1/{rest:path}", catalog.refuse, methods=[*reads, *writes]),
    ]
    handlers = {404: _not_found, 405: _not_allowed, Exception: _failed}
    return _Guard(Starlette(routes=routes, exception_handlers=handlers), catalog)


class _Guard:
    """Every request but the token exchange is authorized first; a body over the bound is
    refused before it is read."""

    def __init__(self, app: ASGIApp, catalog: _Catalog) -> None:
        self.app = app
        self.catalog = catalog

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            request = Request(scope)
            length = request.headers.get("content-length", "0")
            refusal: Response | None = None
            if not (length.isascii() and length.isdigit()) or int(length) > MAX_BODY_BYTES:
                refusal = _error(
                    413, "BadRequestException", f"request bodies are at most {MAX_BODY_BYTES} bytes"
                )
            elif scope["path"] != "/v1/oauth/tokens" and not self.catalog.authorized(request):
                refusal = _error(401, "NotAuthorizedException", "a valid bearer token is required")
                given = "authorization" in request.headers
                LOG.warning(  # the path quoted: a decoded %0A cannot start a line of its own
                    "refused %s %r from %s: %s",
                    request.method,
                    scope["path"],
                    request.client.host if request.client else "an unknown address",
                    "its bearer token is not valid" if given else "no bearer token",
                )
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def _body(request: Request) -> bytes | None:
    """The request's body, or None past ``MAX_BODY_BYTES`` (read no further)."""
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _levels(text: str) -> tuple[str, ...]:
    """Namespace levels from a path or query parameter (decoded already)."""
    return tuple(text.split(LEVELS)) if text else ()


async def _not_found(request: Request, exc: Exception) -> Response:
    return _error(404, "NotFoundException", f"no such resource: {request.url.path}")


async def _failed(request: Request, exc: Exception) -> Response:
    return _error(500, "ServerErrorException", f"{type(exc).__name__}: {exc}")


async def _not_allowed(request: Request, exc: Exception) -> Response:
    code = exc.status_code if isinstance(exc, HTTPException) else 405
    return _error(code, "UnsupportedOperationException", f"{request.method} {request.url.path} is not served")


def _no_namespace(levels: tuple[str, ...]) -> Response:
    return _error(404, "NoSuchNamespaceException", f"namespace does not exist: {'.'.join(levels)}")


def _error(code: int, kind: str, message: str) -> Response:
    return JSONResponse({"error": {"message": message, "type": kind, "code": code}}, status_code=code)


def _oauth_error(code: int, kind: str, message: str) -> Response:
    return JSONResponse({"error": kind, "error_description": message}, status_code=code)
