# The Iceberg view of a table, read with PyIceberg (docs: engines.md); the table is the one
# tables.py writes.
# --8<-- [start:publish]
from pyiceberg.table import StaticTable

from fedcore import load_table
from fedcore.iceberg import publish

table = load_table("lake/tables/trips")
result = publish(table)  # one Iceberg snapshot per fed instant since the last publish
view = StaticTable.from_metadata(result.metadata_location)
usa = view.scan(row_filter="country = 'usa'").to_arrow()  # one partition's files, no listing
# --8<-- [end:publish]
