# One entry point for humans and CI: `make demo`, `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q

.PHONY: venv demo test lint bench clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PIP) install torch==2.13.0
	$(PIP) install -c constraints.txt -e '.[dev,gpu]'
	touch $@

demo: venv
	$(VENV)/bin/traindoctor run examples/train_digits.py --epochs 3

lint: venv
	$(VENV)/bin/ruff check src tests benchmarks examples
	$(VENV)/bin/ruff format --check src tests benchmarks examples
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

test: lint
	$(PY) -m pytest --cov --cov-report=term -q

bench: venv
	$(PY) benchmarks/overhead.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .coverage traindoctor-runs
