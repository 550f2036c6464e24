"""Everything that runs on the accelerator: models, samplers, timers, metrics."""
