"""System metrics: psutil and /proc readers, NVML, and the sampler thread."""
