"""Plan, drive and store a sweep: spec → RunConfigs → Ray actors → checksummed artifacts. Never imports torch."""
