"""The read path: a scan (``scan.DataScan``) is planned from the metadata table into pruned
file slices (``planner``), and each slice is read into Arrow (``slice_reader``)."""
