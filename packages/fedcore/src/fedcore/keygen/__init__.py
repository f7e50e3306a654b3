"""Records and their keys: Hudi's meta columns, record keys and partition paths computed on Arrow."""
