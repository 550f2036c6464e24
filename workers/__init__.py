"""What runs on the accelerator: the runner and its environment; models, measure, samplers, quality."""
