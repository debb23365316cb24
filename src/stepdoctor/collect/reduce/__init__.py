"""Off the hot path: the monitor thread, the step reducer and the progress lines."""
