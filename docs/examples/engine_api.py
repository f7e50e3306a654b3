# The engine API: a write run as an engine runs it, tasks anywhere, then a planned read
# (docs: architecture.md); the table is the one tables.py writes.
# --8<-- [start:engine_api]
import pyarrow as pa

from fedcore import load_table
from fedcore.engine import WriteJob

table = load_table("lake/tables/trips")  # the table written above
rows = pa.table({"trip_id": [4, 5], "country": ["usa", "bra"], "ts": [1, 1], "fare": [9.0, 41.0]})
job = WriteJob.open(table, "insert", rows.schema)  # recovers failed writes, learns the schema
with job:  # an error rolls the instant back
    job.begin()  # requested; the heartbeat beats
    stats = [  # each task writes its rows, returns stats
        stat
        for task, part in enumerate([rows.slice(0, 1), rows.slice(1)])
        for stat in job.write_new(part, task)
    ]
    result = job.commit(stats, distributed=True)  # then clean, compact, archive (never raises)

plan = table.scan([("fare", ">", 20)], ["trip_id"]).plan()  # ScanPlan: pruned slices, pickles small
pieces = [plan.read(s) for s in plan.slices]  # what each task reads: one slice as Arrow
# --8<-- [end:engine_api]
