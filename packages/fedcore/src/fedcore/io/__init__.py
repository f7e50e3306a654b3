"""File I/O: URIs, per-root filesystems, atomic creates and the federated filesystem."""
