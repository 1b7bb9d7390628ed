# The learner's set-up: a pinned .venv and JupyterLab on the course, in my-work/.
# Included by the course repository's Makefile and by the student handout's (course_tools.handout).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: lab clean-venv

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=24"
	$(BIN)/python -m pip install --quiet -r requirements.txt
	PYTHONWARNINGS=ignore $(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

## Open the course in JupyterLab (lesson 1 first).  Your work lives in my-work/ (gitignored):
## the first run copies the release there; later runs add new notebooks and never overwrite yours.
## lab-settings/ turns off nbgrader's instructor tools (Validate stays) and the news pop-up.
WORK := my-work
lab: $(STAMP)
	$(BIN)/python lab-settings/copy_release.py notebooks $(WORK)
	$(BIN)/jupyter lab --ServerApp.root_dir=$(CURDIR) --LabApp.default_url=/lab/tree/$(WORK)/lesson1/lesson1.ipynb \
		--LabApp.app_settings_dir=$(CURDIR)/lab-settings \
		"--ServerApp.jpserver_extensions={'nbgrader.server_extensions.formgrader': False}" \
		$(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

clean-venv:
	rm -rf $(VENV)
