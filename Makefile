# One entry point for humans and CI: `make demo`, `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q

.PHONY: venv browser demo test test-pythons test-gpu lint bench asan clean

venv: $(VENV)/.installed

# The C parts (hot-path hooks, step reducer, samplers, trace scanner, GC log scanner;
# hatch_build.py compiles them): the
# editable install builds them in place, so it runs again when their source changes.
C_PARTS := collect/hooks/_hotpath collect/reduce/_reduce collect/sampling/_sample \
	collect/sampling/_frames traces/_scan logs/_gcscan

$(VENV)/.installed: pyproject.toml hatch_build.py constraints.txt \
		$(C_PARTS:%=src/stepdoctor/%.c) $(wildcard src/stepdoctor/*/*.h src/stepdoctor/*/*/*.h)
	python3 -m venv $(VENV)
	$(PIP) install torch==2.13.0
	$(PIP) install -c constraints.txt -e '.[dev,gpu]'
	touch $@

demo: venv
	$(VENV)/bin/stepdoctor run examples/train_digits.py --epochs 3

lint: venv
	$(VENV)/bin/ruff check src tests benchmarks examples hatch_build.py noxfile.py
	$(VENV)/bin/ruff format --check src tests benchmarks examples hatch_build.py noxfile.py
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# The HTML report's browser test needs Chromium (Debian's package); without root or apt the
# test is skipped and says why.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && { apt-get install -y -q chromium >/dev/null 2>&1 \
	       || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1; }; } \
	  || echo "chromium could not be installed: the HTML report's browser test will be skipped"; }

# CI has a compiler, so there the C parts must have been built (tests/collect/test_hotpath.py,
# tests/traces/test_loader_paths.py).
# The jobs the tests run are processes of their own: with Python's bytecode cache (git ignores
# __pycache__) each one does not compile stepdoctor's modules again (~0.3 s a job here).
# Two parts: first every test but those marked serial, spread over the cores (pytest-xdist; a
# verdict that fails on a run the record shows sharing a busy machine is judged again on a run
# with no other test beside it: tests/_machine.py); then, one at a time, the tests marked
# serial (their verdicts read the machine's load, or they load every core). -n auto gives a
# worker to each core other processes leave idle (tests/conftest.py), at least one. Both run
# under coverage.py: the second adds its figures to the first's and reports the total (the
# floor in pyproject.toml applies to it).
PYTEST = env -u PYTHONDONTWRITEBYTECODE STEPDOCTOR_REQUIRE_C_PARTS=1 $(PY) -m pytest -q --durations=25
test: lint browser
	$(PYTEST) --cov --cov-report= --cov-fail-under=0 -n auto --dist worksteal \
	  -m "not package and not serial"
	$(PYTEST) --cov --cov-append --cov-report=term -m "not package and serial"

# Every supported CPython, each in a venv of its own (noxfile.py): lint and types on the lowest;
# on each but the dev venv's (make test's), the wheel with its C parts and the tests that are
# not scenario runs, without torch;
# the sdist and the wheel installed in fresh venvs, with and without a compiler.
# pyenv's interpreters are put on PATH where pyenv is there; one that is missing is skipped, and
# nox's summary says so.
PYENV_PYTHONS = $(shell pyenv versions --bare 2>/dev/null | grep -E '^3\.1[0-3]\.[0-9]+$$' | paste -sd: -)
test-pythons: venv
	PYENV_VERSION="$(PYENV_PYTHONS)" $(VENV)/bin/nox

# On a machine with a CUDA GPU (CI has none), with its own CUDA build of torch (not the
# venv's CPU one): the GPU zoo, its true gains and what stepdoctor says of each job and fixed
# twin, into docs/accuracy-gpu.md.
test-gpu:
	PYTHONPATH=src python3 benchmarks/gpu_zoo.py --out stepdoctor-runs/gpu-zoo --build --gains \
	  --runs --doc docs/accuracy-gpu.md

# The C parts built with AddressSanitizer and UBSan, then the tests that drive them (the
# normal build is put back afterwards).
ASAN_LIBS = $(shell gcc -print-file-name=libasan.so) $(shell gcc -print-file-name=libubsan.so)
asan: venv
	@set -e; inc=$$($(PY) -c "import sysconfig; print(sysconfig.get_paths()['include'])"); \
	suffix=$$($(PY) -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))"); \
	for m in $(C_PARTS); do \
	  cp src/stepdoctor/$$m$$suffix src/stepdoctor/$$m$$suffix.keep; \
	  gcc -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined \
	    -fno-sanitize-recover=undefined -fPIC -shared -I$$inc src/stepdoctor/$$m.c \
	    -o src/stepdoctor/$$m$$suffix; \
	done; \
	status=0; LD_PRELOAD="$(ASAN_LIBS)" ASAN_OPTIONS=detect_leaks=0 STEPDOCTOR_REQUIRE_C_PARTS=1 \
	  $(PY) -m pytest -q -p no:cacheprovider tests/traces/test_loader_paths.py \
	  tests/traces/test_fuzz.py tests/collect/test_hotpath.py tests/collect/test_forward_patch.py \
	  tests/collect/test_reducer.py tests/collect/test_session.py tests/collect/test_events.py \
	  tests/collect/test_gcwatch.py tests/logs/test_fast.py \
	  tests/collect/test_sampler.py tests/collect/test_readers.py tests/collect/test_stacks.py \
	  || status=$$?; \
	for m in $(C_PARTS); do \
	  mv src/stepdoctor/$$m$$suffix.keep src/stepdoctor/$$m$$suffix; \
	done; exit $$status

bench: venv
	$(PY) benchmarks/overhead.py

clean:
	rm -rf $(VENV) .nox .mypy_cache .ruff_cache .pytest_cache .coverage stepdoctor-runs test-artifacts
