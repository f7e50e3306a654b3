"""Files and file groups: Hudi's file names, file slices and the file-group model that readers
and writers share."""
