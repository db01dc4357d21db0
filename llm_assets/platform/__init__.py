"""The services the platform runs on: the object store, the cluster, Dagster's instance (its pools, partitions,
backfills and failed runs, and the one module of its private API), the deployment, the environment."""
