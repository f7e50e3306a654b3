"""A table's schema: Hudi's meta columns, the Avro schema commits record, a write's input read
as Arrow, the schema conformed to and evolved by writes, and the Iceberg schema of the view."""
