# The two front doors: `make book` and `make test`. Both start from nothing.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JB_FLAGS := --all --warningiserror --nitpick --keep-going
# pytest workers (PARALLEL= for one process): the slow tests (grading a class, running notebooks) mostly wait on kernels.
# --dist loadfile keeps each notebook on one worker, so its cells share one kernel.
PARALLEL ?= 2

.PHONY: help install book serve test browser sandbox bench model notebooks assignments grade course-book clean

help:
	@echo "make book     build the HTML book into _build/html (installs first)"
	@echo "make test     run every test (installs first)"
	@echo "make serve    serve the built book on http://127.0.0.1:8000"
	@echo "make bench    benchmarks (not part of make test)"
	@echo "make model    retrain the shipped models (needs PyTorch CPU; installs torch==2.13.0 if it can)"
	@echo "make assignments / make grade SUBMISSIONS=DIR / make course-book   course workflow"

# --- environment ----------------------------------------------------------
$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps -e .
	@# Kernels started by the build log a TCP notice on every start; keep the log to real problems.
	@mkdir -p $(VENV)/etc/ipython && echo "c.IPKernelApp.log_level = 'ERROR'" > $(VENV)/etc/ipython/ipython_kernel_config.py
	@touch $@

install: $(STAMP)

# --- the book -------------------------------------------------------------
book: $(STAMP)
	$(BIN)/jupyter-book build . $(JB_FLAGS)
	@echo
	@echo "Open file://$(CURDIR)/_build/html/index.html  (or: make serve)"

serve:
	@test -f _build/html/index.html || { echo "no book yet: run make book first"; exit 1; }
	$(BIN)/python -m http.server 8000 --bind 127.0.0.1 --directory _build/html

# --- tests ----------------------------------------------------------------
test: $(STAMP) sandbox
	$(BIN)/python -m pytest tests attnlib --ignore=tests/site $(if $(PARALLEL),-n $(PARALLEL) --dist worksteal)
	$(BIN)/python -m pytest --nbval chapters exercises --nbval-cell-timeout=120 \
	    --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider $(if $(PARALLEL),-n $(PARALLEL) --dist loadfile)
	$(MAKE) --no-print-directory book
	$(MAKE) --no-print-directory browser
	$(BIN)/python -m pytest tests/site
	@echo "Screenshots of every page: _build/screenshots/"

# Debian's Chromium for the browser test, installed where this user can (root + apt).
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing chromium and chromium-driver (Debian packages) for the browser test"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) >/dev/null \
	        || echo "could not install chromium: the browser test will skip (and fail under CI=true)"; \
	else \
	    echo "chromium is missing and this user cannot apt-get it: the browser test will skip (and fail under CI=true)"; \
	fi

# --- the course (nbgrader) ----------------------------------------------------
assignments: $(STAMP)
	$(BIN)/python scripts/course.py assignments

# Student code runs in a bubblewrap sandbox; MEMORY and CPU cap each kernel process
# (defaults 2G and 120 s); UNSAFE=1 grades without a sandbox where bwrap is missing.
grade: $(STAMP) sandbox
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=DIR  (DIR/<student>/<assignment>/<notebook>.ipynb)"; exit 2; }
	PM_GRADE_UNSAFE="$(UNSAFE)" $(if $(MEMORY),PM_GRADE_MEMORY="$(MEMORY)") $(if $(CPU),PM_GRADE_CPU="$(CPU)") \
	    $(BIN)/python scripts/course.py grade "$(SUBMISSIONS)"

# Debian's bubblewrap (and util-linux's prlimit) for grading, installed where this user can.
sandbox:
	@if command -v bwrap >/dev/null && command -v prlimit >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing bubblewrap (Debian package) to grade student code in a sandbox"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap util-linux) >/dev/null \
	        || echo "could not install bubblewrap: grading will refuse to run student code (UNSAFE=1 overrides)"; \
	else \
	    echo "bubblewrap is missing and this user cannot apt-get it: grading will refuse to run student code (UNSAFE=1 overrides)"; \
	fi

course-book: $(STAMP)
	$(BIN)/python scripts/course.py book

# PyTorch is the reference, never a dependency: install it if it can be had (offline here).
bench: $(STAMP)
	@$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q torch==2.13.0 \
	    || echo "torch not installed: the PyTorch rows will say so"
	$(BIN)/python benchmarks/run.py $(BENCH_ARGS)

# Retrain every shipped model from its seed (attnlib/models/): bit-identical with
# the same torch version and MODEL_THREADS. PyTorch is a tool here, never a dependency.
MODEL_THREADS ?= 1
model: $(STAMP)
	@$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q torch==2.13.0 \
	    || { echo "PyTorch is needed to train: pip install torch==2.13.0"; exit 1; }
	$(BIN)/python scripts/train_model.py --threads $(MODEL_THREADS) $(MODELS)

# Re-execute the notebooks and store their outputs (what nbval compares).
notebooks: $(STAMP)
	for nb in chapters/*.ipynb exercises/*/*.ipynb; do \
	    (cd $$(dirname $$nb) && $(CURDIR)/$(BIN)/jupyter nbconvert --log-level=ERROR --to notebook --execute --inplace $$(basename $$nb)) || exit 1; \
	done

clean:
	rm -rf _build course
