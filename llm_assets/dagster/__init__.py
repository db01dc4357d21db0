"""The Dagster layer: the adapter that makes the stages' assets, the jobs, the sensors and checks, the vacuum and
preview jobs, and how reports are shown in the UI."""
