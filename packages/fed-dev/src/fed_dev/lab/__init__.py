"""The S3 throttling lab: a model of S3's per-partition request limits and a proxy that
enforces it in front of a real S3-protocol server (see ``partitions`` and ``proxy``)."""
