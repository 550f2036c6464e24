"""One GPU round (`just gpu-round`): its arguments, plan, state, times, specs, gate, goals and results."""
