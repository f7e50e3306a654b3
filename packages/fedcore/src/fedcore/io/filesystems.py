"""One fsspec filesystem per root, each with the options the caller gave for it.

Storage options are credentials and endpoints, so they come from the caller (or
the environment, which s3fs and botocore read themselves) and are never written
to the table. They are keyed by protocol (``"s3"``: every S3 root) or by URI
prefix (``"s3://lake-eu"``: that bucket only); for a root, the protocol's options
apply first and then each matching URI's, shortest first, so the most specific
wins. Dict values (``client_kwargs``, ``s3_additional_kwargs``) merge one level
deep, so a bucket can add its own KMS key without repeating the endpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

import fsspec
from fsspec import AbstractFileSystem

from fedcore.exceptions import InvalidStorageConfigError
from fedcore.io.uris import has_scheme, is_within, normalize_uri, protocol_of

StorageOptions: TypeAlias = Mapping[str, Mapping[str, Any]]


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
        options.setdefault("auto_mkdir", True)
    try:
        return fsspec.filesystem(protocol, **options)
    except (ImportError, ValueError) as exc:
        raise InvalidStorageConfigError(
            f"storage options for {uri}", f"no usable filesystem for protocol {protocol!r}: {exc}"
        ) from exc
