"""``fed``, the command line: the entry point and its commands (``main``), the table commands
(``table``: create, write, read, files, timeline, ...) and the maintenance commands
(``maintenance``: clean, compact, rollback, repair, verify, migrate, upgrade, sync)."""
