"""Probes that need no run: the environment (``stepdoctor doctor``), a model's description
(``stepdoctor.lint``) and the process's metadata."""
