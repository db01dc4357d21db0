"""What people ask of the lake, without Dagster's definitions: what is stale and why (the planner), status, trace,
export, takedowns."""
