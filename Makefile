# Transformers by counting: the two set-up commands are `make lab` and `make test`.
# Both create .venv (Python 3.11, pinned packages from requirements.txt) if needed; both are idempotent.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: lab test release grade clean-venv

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=24"
	$(BIN)/python -m pip install --quiet -r requirements.txt
	PYTHONWARNINGS=ignore $(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

## Open the course in JupyterLab (lesson 1 first).  Your work lives in my-work/ (gitignored):
## the first run copies the release there; later runs add new notebooks and never overwrite yours.
WORK := my-work
lab: $(STAMP)
	mkdir -p $(WORK) && cp -rn notebooks/. $(WORK)/
	$(BIN)/jupyter lab --ServerApp.root_dir=$(CURDIR) --LabApp.default_url=/lab/tree/$(WORK)/lesson1/lesson1.ipynb \
		$(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

## Run the whole test suite (what CI runs).
test: $(STAMP)
	$(BIN)/python -m pytest -n 2 $(PYTEST_ARGS)

## Regenerate the student release notebooks/ from solutions/ with nbgrader.
release: $(STAMP)
	$(BIN)/python -m course_tools.release

## Grade a folder of submissions: make grade SUBMISSIONS=path/to/folder [OUT=grading] [GRADE_ARGS="--jobs 2"]
grade: $(STAMP)
	$(BIN)/python -m course_tools.grade $(SUBMISSIONS) --out $(or $(OUT),grading) $(GRADE_ARGS)

clean-venv:
	rm -rf $(VENV)
