"""The Dagster code location: definitions, jobs, schedules, sensors, and the ``hypograph`` CLI."""
