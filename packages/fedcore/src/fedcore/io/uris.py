"""URI normal form and containment, so that two spellings of a path compare equal.

Locations are compared (is the storage path inside the table path? which root
holds this file?) and joined on every path conversion, so every URI fedcore keeps
is normalised once, on the way in: a scheme, no trailing slash, local paths absolute.
"""

from __future__ import annotations

import os
import re
from typing import Final

from fedcore.exceptions import InvalidPathError

_SCHEME_RE: Final = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")


def normalize_uri(uri: str) -> str:
    """``s3://b/x/`` -> ``s3://b/x``; ``./t`` and ``file:/abs/t`` -> ``file:///abs/t``."""
    if not uri or not uri.strip():
        raise InvalidPathError("a path or URI must not be empty")
    match = _SCHEME_RE.match(uri)
    if match is None and uri[:6].lower() == "file:/":  # Hadoop's spelling, as Spark passes paths
        return "file://" + os.path.abspath(uri[5:].rstrip("/") or "/")
    if match is None:
        return "file://" + os.path.abspath(os.path.expanduser(uri))
    scheme = match.group(1).lower()
    rest = uri[match.end() :].rstrip("/")
    if scheme == "file":
        return "file://" + os.path.abspath(rest if rest.startswith("/") else "/" + rest)
    if not rest:
        raise InvalidPathError(f"{uri!r} names no bucket or host")
    return f"{scheme}://{rest}"


def has_scheme(uri: str) -> bool:
    return _SCHEME_RE.match(uri) is not None


def protocol_of(uri: str) -> str:
    match = _SCHEME_RE.match(uri)
    return match.group(1).lower() if match else "file"


def is_within(child: str, parent: str) -> bool:
    """True when ``child`` is ``parent`` or below it (both normalised)."""
    return child == parent or child.startswith(parent + "/")


def check_relative_path(path: str) -> None:
    """Reject a table-relative path that could land outside its folder.

    Refused: "." and ".." segments, empty segments (so no leading "/"), backslashes
    (a folder separator on some disks) and unprintable characters. Plain string
    scans, not a regex: this runs on every path conversion.
    """
    wrapped = f"/{path}/"
    if "//" in wrapped or "/./" in wrapped or "/../" in wrapped or "\\" in path or not path.isprintable():
        raise InvalidPathError(
            f"{path!r} is not a safe table-relative path "
            "(no '.', '..' or empty segments, no backslashes or control characters)"
        )
