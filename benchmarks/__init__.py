"""Per-core throughput benchmarks of the processing core and the work units (`make bench`)."""
