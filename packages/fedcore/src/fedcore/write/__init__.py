"""The write path: ``client.WriteClient`` takes rows, ``planner`` decides which file groups
they go to (insert, update, merge-on-read log), and ``job`` writes the files and commits them."""
