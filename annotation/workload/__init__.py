"""The PM\x27s workload and deadlines page, and batch operations on a project."""
