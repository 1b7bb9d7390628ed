# Transformers by counting: the two set-up commands are `make lab` and `make test`.
# Both create .venv (Python 3.11, pinned packages from requirements.txt) if needed; both are idempotent.
include lab.mk

.PHONY: test release grade handout

## System packages the tests start for real (installed with apt-get when missing and allowed).
SYSTEM_PACKAGES := bubblewrap:bwrap chromium:chromium chromium-driver:chromedriver

## Run the whole test suite (what CI runs).
test: $(STAMP)
	bash scripts/system-packages $(SYSTEM_PACKAGES)
	$(BIN)/python -m pytest -n 2 $(PYTEST_ARGS)

## Regenerate the student release notebooks/ from solutions/ with nbgrader.
release: $(STAMP)
	$(BIN)/python -m course_tools.release

## Grade a folder of submissions: make grade SUBMISSIONS=path/to/folder [OUT=grading] [GRADE_ARGS="--jobs 2"]
grade: $(STAMP)
	$(BIN)/python -m course_tools.grade $(SUBMISSIONS) --out $(or $(OUT),grading) $(GRADE_ARGS)

## Write what students need to a folder of its own (no solutions, no hidden tests, no tests):
## make handout OUT=path/to/folder
handout: $(STAMP)
	$(BIN)/python -m course_tools.handout $(or $(OUT),handout)
