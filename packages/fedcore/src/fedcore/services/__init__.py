"""Table services: work on a table's files beside its writers (clean, compact, archive, roll back) and the
tools that check storage against the timeline (history, inventory, repair, verify)."""
