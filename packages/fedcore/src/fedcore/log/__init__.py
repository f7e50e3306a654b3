"""Merge-on-read log files: Hudi's log block format, read and written (``format``), and how
log records merge onto a base file by Hudi's payload rules (``merge``)."""
