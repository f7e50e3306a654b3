"""One fsspec filesystem per root, each with the options the caller gave for it.

Storage options are credentials and endpoints, so they come from the caller (or
the environment, which s3fs and botocore read themselves) and are never written
to the table. They are keyed by protocol (``"s3"``: every S3 root) or by URI
prefix (``"s3://lake-eu"``: that bucket only); for a root, the protocol's options
apply first and then each matching URI's, shortest first, so the most specific
wins. Dict values (``client_kwargs``, ``s3_additional_kwargs``) merge one level
deep, so a bucket can add its own KMS key without repeating the endpoint.

S3 throttles requests per key-range partition and answers the excess with ``503 Slow
Down``. fedcore's S3 clients retry it, and every 5xx, at two levels, so a throttled write
is slowed, not failed:

- botocore's **standard** retry mode, ``S3_RETRIES`` times after the first attempt, with
  exponential backoff and full jitter per request. Not the adaptive mode: its client-side
  rate limiter is one per client, so a 503 on one prefix slows requests to every other
  prefix, which is the wrong reaction to throttling that S3 applies per prefix (in the
  throttling lab, a hashed layout's writers made about half the writes in adaptive mode
  that they made in standard mode);
- s3fs's own tries, ``S3_TRIES`` of them (s3fs's default is 5), waiting up to 15 s between
  tries. botocore's retry quota stops retrying once about 100 retries are outstanding
  in a burst, which a writer with many files in flight on one hot prefix reaches in a
  second; s3fs's tries carry those writes through.

Give ``config_kwargs={"retries": {...}}`` to choose botocore's retries otherwise.

An endpoint that refuses connections, or a host that does not resolve, is no throttling:
retrying it for minutes only delays the error. Such a request is tried
``CONNECT_ATTEMPTS`` times (about a second; the S3 option ``connect_attempts`` to change
it), then fails (``StorageUnavailableError`` naming the endpoint); a connection or read
that times out keeps its retries (a slow or overloaded store), each attempt bounded by
botocore's ``connect_timeout`` (fedcore's default ``CONNECT_TIMEOUT_S``;
``config_kwargs={"connect_timeout": ...}`` to change it).
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import botocore.exceptions
import fsspec
import fsspec.asyn
from fsspec import AbstractFileSystem
from fsspec.spec import AbstractBufferedFile

from fedcore.exceptions import InvalidStorageConfigError, StorageError, StoragePermissionError
from fedcore.io.errors import storage_errors
from fedcore.io.uris import has_scheme, is_within, normalize_uri, protocol_of

StorageOptions: TypeAlias = Mapping[str, Mapping[str, Any]]
#: Retries botocore makes of an S3 request before s3fs's own tries take over.
S3_RETRIES: Final = 10
#: botocore's retry mode for S3 (see the module docstring for why not "adaptive").
S3_RETRY_MODE: Final = "standard"
#: Tries s3fs makes of a request whose botocore retries all answered ``SlowDown`` (its
#: default is 5; its waits between tries grow 1.7 times from 0.1 s to at most 15 s, so
#: 15 tries wait about 100 s in all).
S3_TRIES: Final = 15
#: Attempts of a request whose endpoint refuses the connection or does not resolve.
CONNECT_ATTEMPTS: Final = 3
#: Seconds a connection may take to open (botocore's default is 60).
CONNECT_TIMEOUT_S: Final = 5


#: fed's own S3 option (taken out before s3fs sees the options): ``CONNECT_ATTEMPTS`` otherwise.
CONNECT_ATTEMPTS_OPTION: Final = "connect_attempts"
#: fed's own S3 option (taken out before s3fs sees the options): the AWS profile of the session.
PROFILE_OPTION: Final = "profile"
#: The S3 options fedcore sets itself where the caller does not (besides the flat keys).
SESSION_OPTION: Final = "session"
CONFIG_OPTION: Final = "config_kwargs"
CLIENT_OPTION: Final = "client_kwargs"
#: Local storage: fedcore makes a file's folders as it writes it.
AUTO_MKDIR_OPTION: Final = "auto_mkdir"
#: The flat storage options (``--storage-option``, Spark's ``fed.storage.*``) that go to the
#: botocore client (``client_kwargs``); the others go to s3fs as they are.
CLIENT_KEYS: Final = ("endpoint_url", "region_name")


@dataclass(frozen=True)
class StorageOption:
    """A storage option fedcore itself reads or sets (the configuration reference lists
    them); every other key goes to the protocol's fsspec filesystem as it is."""

    name: str
    protocol: str
    default: str | None
    description: str
    example: str


#: The storage options fedcore reads or sets, per protocol.
STORAGE_OPTIONS: Final[tuple[StorageOption, ...]] = (
    StorageOption(
        PROFILE_OPTION,
        "s3",
        None,
        "An AWS profile of the config or credentials files: the botocore session fedcore's S3 "
        "clients share is made with it (s3fs reads the option only into a session it makes "
        "itself). A profile botocore does not know is refused (`InvalidStorageConfigError`), as "
        f"is a profile beside `{SESSION_OPTION}`. Default: botocore's (`AWS_PROFILE`, else the "
        "environment's credentials chain).",
        '"lake-writer"',
    ),
    StorageOption(
        CONNECT_ATTEMPTS_OPTION,
        "s3",
        str(CONNECT_ATTEMPTS),
        "Attempts of a request whose endpoint refuses the connection or does not resolve, before "
        "`StorageUnavailableError` names the endpoint (a whole number from 1); timeouts keep "
        "their retries.",
        '"5"',
    ),
    StorageOption(
        SESSION_OPTION,
        "s3",
        "fedcore's shared session",
        "An aiobotocore session of the caller's (Python API): used for the requests, with "
        "fedcore's fail-fast hook for unreachable endpoints registered on it.",
        "aiobotocore.session.AioSession(profile=...)",
    ),
    StorageOption(
        CONFIG_OPTION,
        "s3",
        f'{{"retries": {{"mode": "{S3_RETRY_MODE}", "max_attempts": {S3_RETRIES}}}, '
        f'"connect_timeout": {CONNECT_TIMEOUT_S}}}',
        "botocore's `Config` arguments; fedcore's retries and connect timeout apply where these "
        "do not name them.",
        '{"connect_timeout": 10}',
    ),
    StorageOption(
        CLIENT_OPTION,
        "s3",
        None,
        "The botocore client's arguments: `endpoint_url` (a store other than AWS), `region_name`. "
        f"The flat keys {', '.join(f'`{k}`' for k in CLIENT_KEYS)} land here.",
        '{"endpoint_url": "http://localhost:9000"}',
    ),
    StorageOption(
        AUTO_MKDIR_OPTION,
        "file",
        "true",
        "Whether a file's folders are made as it is written (object stores have no folders).",
        "true",
    ),
)


def _unreachable_fails_fast(
    caught_exception: BaseException | None = None, attempts: int = 0, *, limit: int, **_: Any
) -> None:
    """botocore's ``needs-retry`` hook, run before its retry handler: a refused connection or
    an unknown host is raised once ``limit`` attempts failed (timeouts are left to the retry
    handler)."""
    if (
        isinstance(caught_exception, botocore.exceptions.EndpointConnectionError)
        and not isinstance(caught_exception, botocore.exceptions.ConnectTimeoutError)
        and attempts >= limit
    ):
        raise caught_exception


def _fail_fast_after(session: Any, limit: int) -> None:
    session.register(
        "needs-retry.s3",
        functools.partial(_unreachable_fails_fast, limit=limit),
        unique_id="fed-unreachable-fails-fast",
    )


@functools.cache
def _s3_session(limit: int, profile: str | None = None) -> Any:
    """The botocore session fedcore's S3 filesystems share (one per connect-attempt limit
    and profile, so that fsspec's cache of filesystems by their options still finds them),
    with ``_unreachable_fails_fast``. s3fs reads the ``profile`` option only into a session
    it makes itself, so the profile is this session's."""
    import aiobotocore.session  # S3 only: a third of fedcore's import time otherwise

    session = aiobotocore.session.AioSession(profile=profile)
    _fail_fast_after(session, limit)
    session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=_parse_timestamp)
    return session


#: An ISO 8601 timestamp with its zone, as S3 gives each listed object's ``LastModified``.
_ISO_TIMESTAMP: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}:\d{2})")


def _parse_timestamp(value: Any) -> datetime.datetime:
    """botocore's parse of a timestamp in a response, without dateutil for S3's usual form.

    botocore parses every timestamp with dateutil's general parser, some 40 µs each: a
    listing's page of 1,000 objects spent 40 ms of CPU on its ``LastModified`` fields alone,
    more than the request. An ISO 8601 timestamp with its zone (``2024-05-01T12:00:00.000Z``)
    is read by ``datetime.fromisoformat`` (the same instant, aware); any other form (an HTTP
    date in a header, epoch seconds) goes to botocore's own parser."""
    if isinstance(value, str) and _ISO_TIMESTAMP.fullmatch(value):
        # (3.10's fromisoformat reads neither "Z" nor a fraction of other than 3 or 6 digits)
        with contextlib.suppress(ValueError):
            return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    from botocore.utils import parse_timestamp

    parsed: datetime.datetime = parse_timestamp(value)
    return parsed


def _profile(uri: str, options: dict[str, Any]) -> str | None:
    """The storage option ``profile``, taken out of the options (it goes to the session) and
    checked: a profile botocore does not know would otherwise fail at the first request or,
    with ``AWS_*`` variables set, be passed over for them."""
    profile = options.pop(PROFILE_OPTION, None)
    if profile is None:
        return None
    import aiobotocore.session

    known = aiobotocore.session.AioSession().available_profiles
    if profile not in known:
        raise InvalidStorageConfigError(
            f"storage option profile for {uri}",
            f"{profile!r} is not a profile of the AWS config or credentials files "
            f"(profiles there: {', '.join(sorted(known)) or 'none'})",
        )
    return str(profile)


def _connect_attempts(uri: str, options: dict[str, Any]) -> int:
    given = options.pop(CONNECT_ATTEMPTS_OPTION, CONNECT_ATTEMPTS)
    try:
        attempts = int(given)
    except (TypeError, ValueError):
        attempts = 0
    if attempts < 1:
        raise InvalidStorageConfigError(
            f"storage option {CONNECT_ATTEMPTS_OPTION} for {uri}", f"{given!r} is not a whole number from 1"
        )
    return attempts


def storage_options_of(pairs: Mapping[str, str]) -> StorageOptions | None:
    """S3 options from flat ``key=value`` pairs (the CLI's ``--storage-option``, Spark's
    ``fed.storage.*``): ``endpoint_url`` and ``region_name`` go to the botocore client, the
    rest to s3fs."""
    if not pairs:
        return None
    options: dict[str, Any] = {}
    for key, value in pairs.items():
        if key in CLIENT_KEYS:
            options.setdefault(CLIENT_OPTION, {})[key] = value
        else:
            options[key] = value
    return {"s3": options}


def options_for(uri: str, storage_options: StorageOptions | None) -> dict[str, Any]:
    if not storage_options:
        return {}
    uri = normalize_uri(uri)
    layers: list[Mapping[str, Any]] = []
    if protocol_of(uri) in storage_options:
        layers.append(storage_options[protocol_of(uri)])
    scoped = sorted(
        ((normalize_uri(key), value) for key, value in storage_options.items() if has_scheme(key)),
        key=lambda item: len(item[0]),
    )
    layers.extend(value for key, value in scoped if is_within(uri, key))
    merged: dict[str, Any] = {}
    for layer in layers:
        for name, value in layer.items():
            if isinstance(value, Mapping) and isinstance(merged.get(name), Mapping):
                merged[name] = {**merged[name], **value}
            else:
                merged[name] = value
    return merged


def filesystem_for(uri: str, storage_options: StorageOptions | None = None) -> AbstractFileSystem:
    """The fsspec filesystem serving ``uri``, built with that root's options."""
    protocol = protocol_of(uri)
    options = options_for(uri, storage_options)
    if protocol == "file":
        # Object stores have no folders; on local disk a file's folders must exist first.
        options.setdefault(AUTO_MKDIR_OPTION, True)
    elif protocol == "s3":
        config = dict(options.get(CONFIG_OPTION) or {})
        config.setdefault("retries", {"mode": S3_RETRY_MODE, "max_attempts": S3_RETRIES})
        config.setdefault("connect_timeout", CONNECT_TIMEOUT_S)
        options[CONFIG_OPTION] = config
        attempts = _connect_attempts(uri, options)
        if SESSION_OPTION in options:  # the caller's: it fails fast too (and carries its profile)
            if PROFILE_OPTION in options:
                raise InvalidStorageConfigError(
                    f"storage option profile for {uri}", "goes to the session given with it, not beside it"
                )
            _fail_fast_after(options[SESSION_OPTION], attempts)
        else:
            options[SESSION_OPTION] = _s3_session(attempts, _profile(uri, options))
    try:
        fs = fsspec.filesystem(protocol, **options)
    except (ImportError, ValueError) as exc:
        raise InvalidStorageConfigError(
            f"storage options for {uri}", f"no usable filesystem for protocol {protocol!r}: {exc}"
        ) from exc
    if protocol == "s3":
        fs.retries = S3_TRIES  # s3fs takes it as an attribute, not an option
    return fs


def read_object(fs: AbstractFileSystem, path: str) -> bytes:
    """A whole (small) object in one request.

    s3fs asks for an object's size (a HEAD) before a plain ``cat_file``, to decide
    whether to download it in parallel parts; a ranged GET from byte 0 skips that
    and halves the requests of reading timeline and metadata-table files. An empty
    object cannot satisfy a range, so it is read plainly."""
    with storage_errors(path):
        try:
            return bytes(fs.cat_file(path, start=0))
        except FileNotFoundError:
            raise
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            return bytes(fs.cat_file(path))


#: What a file's details say of its version, by store: an object store's ETag (of its
#: content) or generation, a local file's inode (replaced by a rename) and modification time.
_VERSION_KEYS: Final = (
    *("ETag", "etag", "generation", "VersionId"),
    *("ino", "mtime", "LastModified", "last_modified"),
)


def version_stamp(fs: AbstractFileSystem, path: str) -> tuple[Any, ...] | None:
    """What changes when ``path`` is written again, from its details (one HEAD on an object
    store, not a read of it); None where it is missing or its details say nothing of its version
    (it is then to be read: a caller cannot tell it unchanged)."""
    try:
        with storage_errors(path):
            info = fs.info(path, refresh=True)  # s3fs answers from its listings' cache without it
    except FileNotFoundError:
        return None
    found = tuple((key, str(info[key])) for key in _VERSION_KEYS if info.get(key) is not None)
    return (info.get("size"), *found) if found else None


def open_sized(fs: AbstractFileSystem, path: str, size: int | None) -> Any:
    """Open for reading a data file whose size the file index already knows.

    An object-store file asks for its details (a HEAD) before its first read:
    for the size, and in s3fs for an ETag to check later reads against, which
    guards against a file rewritten in place. Data files are never rewritten
    (each version has its own name), and the metadata table and commit metadata
    hold their sizes, so a read of N file slices makes N fewer requests. An
    unknown size (None or 0) falls back to asking."""
    if not size:
        return fs.open(path, "rb")
    handle = fs.open(path, "rb", size=size)
    if isinstance(handle, AbstractBufferedFile):
        handle.details = {"name": path, "size": size, "type": "file"}
    return handle


def read_objects(fs: AbstractFileSystem, paths: Sequence[str]) -> list[bytes]:
    """Several whole (small) objects: concurrently on an object store, so reading N
    costs about one round trip rather than N. Raises FileNotFoundError for a missing one."""
    if len(paths) < 2:
        return [read_object(fs, p) for p in paths]
    results = []
    for path, data in zip(paths, _cat_all(fs, paths), strict=True):
        if isinstance(data, FileNotFoundError):
            with storage_errors(path):
                raise data
        results.append(read_object(fs, path) if isinstance(data, BaseException) else bytes(data))
    return results


def read_found(fs: AbstractFileSystem, paths: Sequence[str]) -> dict[str, bytes]:
    """Those of several whole (small) objects that could be read, fetched concurrently;
    a missing or unreadable one is left out (for speculative prefetches, whose caller
    reads what it lacks again and gets the error then)."""
    if not paths:
        return {}
    found = _cat_all(fs, paths)
    return {path: bytes(data) for path, data in zip(paths, found, strict=True) if isinstance(data, bytes)}


def read_existing(fs: AbstractFileSystem, paths: Sequence[str]) -> dict[str, bytes]:
    """Those of several whole (small) objects that exist, fetched concurrently: a missing one
    is left out; any other failure is raised, typed (``read_object``)."""
    if not paths:
        return {}
    out: dict[str, bytes] = {}
    for path, data in zip(paths, _cat_all(fs, paths), strict=True):
        if isinstance(data, FileNotFoundError):
            continue
        if isinstance(data, BaseException):
            try:
                out[path] = read_object(fs, path)  # raises the typed error, or it went away
            except FileNotFoundError:
                continue
        else:
            out[path] = bytes(data)
    return out


def _cat_all(fs: AbstractFileSystem, paths: Sequence[str]) -> list[Any]:
    """Whole objects fetched concurrently; each the bytes or the exception reading it raised."""
    with storage_errors(paths[0]):
        found: list[Any] = fs.cat_ranges(
            list(paths), [0] * len(paths), [None] * len(paths), on_error="return"
        )
    return found


def list_names_after(fs: AbstractFileSystem, folder: str, start_after: str) -> list[str] | None:
    """The names in ``folder`` (its files, and its sub-folders as names without a slash)
    that sort after ``start_after``, on an S3 store in one request per 1,000 names
    (ListObjectsV2's ``StartAfter``: the store skips what comes before); None where the
    store has no such listing (a local folder lists whole, and cheaply)."""
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
    if "s3" not in protocols or not hasattr(fs, "_call_s3"):
        return None
    bucket, key, _ = fs.split_path(folder)
    prefix = f"{key.rstrip('/')}/"

    async def pages() -> list[str]:
        names: list[str] = []
        more: dict[str, str] = {}
        while True:
            page = await fs._call_s3(
                "list_objects_v2",
                Bucket=bucket,
                Prefix=prefix,
                Delimiter="/",
                StartAfter=prefix + start_after,
                **more,
            )
            names += [entry["Key"][len(prefix) :] for entry in page.get("Contents", [])]
            names += [entry["Prefix"][len(prefix) :].rstrip("/") for entry in page.get("CommonPrefixes", [])]
            if not page.get("IsTruncated"):
                return names
            more = {"ContinuationToken": page["NextContinuationToken"]}

    with storage_errors(folder):
        found: list[str] = fsspec.asyn.sync(fs.loop, pages)
    return found


def remove_files(fs: AbstractFileSystem, paths: Sequence[str]) -> None:
    """Delete files in one bulk request where the store has one; a file already gone is
    no error: table services are idempotent, and two writers' services may race to the
    same deletions. A file the store refuses to delete is an error (``StorageError``)."""
    if not paths:
        return
    if _is_s3(fs):
        _delete_objects(fs, paths)
        return
    with storage_errors(paths[0]):
        try:
            fs.rm(list(paths))
            return
        except FileNotFoundError:
            pass  # a local rm of a list stops at the first missing file: go one by one
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                fs.rm_file(path)


def remove_tree(fs: AbstractFileSystem, folder: str) -> None:
    """Delete a folder and everything under it (nothing there: no error); on S3, what the
    store refuses to delete is an error, as in ``remove_files``."""
    with storage_errors(folder):
        if not _is_s3(fs):
            with contextlib.suppress(FileNotFoundError):
                fs.rm(folder, recursive=True)
            return
        found = [str(p) for p in fs.find(folder, detail=False)]
    remove_files(fs, found)


def _is_s3(fs: AbstractFileSystem) -> bool:
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
    return "s3" in protocols and hasattr(fs, "_call_s3")


def _delete_objects(fs: Any, paths: Sequence[str]) -> None:
    """S3's DeleteObjects, a request per bucket and 1,000 keys, its per-key errors raised.

    s3fs's bulk delete asks in quiet mode and drops the answer's ``Errors``: a key the store
    refused (a policy without ``s3:DeleteObject`` on it, object lock, ...) was reported as
    deleted, and a rollback that could not delete an instant's file left it on the timeline."""
    by_bucket: dict[str, list[str]] = {}
    for path in paths:
        bucket, key, _ = fs.split_path(path)
        by_bucket.setdefault(bucket, []).append(key)
    for bucket, keys in by_bucket.items():
        for start in range(0, len(keys), 1000):
            chunk = keys[start : start + 1000]
            where = f"s3://{bucket}/{chunk[0]}"
            with storage_errors(where):
                answer = fs.call_s3(
                    "delete_objects",
                    Bucket=bucket,
                    Delete={"Objects": [{"Key": key} for key in chunk], "Quiet": True},
                )
            for key in chunk:
                fs.invalidate_cache(f"{bucket}/{key}")
            errors = [e for e in answer.get("Errors", []) if e.get("Code") != "NoSuchKey"]
            if errors:
                first = errors[0]
                what = f"s3://{bucket}/{first.get('Key')}"
                reason = f"{first.get('Code')}: {first.get('Message')}"
                more = f" (and {len(errors) - 1} more of {len(chunk)})" if len(errors) > 1 else ""
                if first.get("Code") == "AccessDenied":
                    raise StoragePermissionError(
                        f"{what}: access denied to DeleteObjects ({reason}){more}: check the credentials "
                        "and the bucket's policy (s3:DeleteObject)"
                    )
                raise StorageError(f"{what}: the store did not delete it ({reason}){more}")
