"""Measuring a run: the scenario around a sampler, timers, memory, energy, calibration, CPU benches."""
