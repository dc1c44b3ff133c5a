# The few commands people type. See docs/development.md.
#
# Two venvs, because bpy 5.0.1 pins numpy<2 while pin (Pinocchio) needs numpy>=2:
#   .venv/engine   NumPy 2.x, pin, MuJoCo, ruff: tests/core against the reference libraries,
#                  tests/strands_io.
#   .venv/blender  NumPy 1.26, bpy, alembic3d, MuJoCo: tests/core and tests/strands_io again,
#                  tests/blender, demo, bench, build.
#   .venv/blender-lts  bpy 4.2 (the oldest Blender supported): tests/blender again.

PYTHON ?= python3.11
VENV := .venv
ENGINE := $(VENV)/engine
BLENDER := $(VENV)/blender
BLENDER_LTS := $(VENV)/blender-lts

# bpy reads BLENDER_USER_RESOURCES once, at import: commands that may start Blender get a
# throw-away folder for its configuration and extensions, removed when they end.
BLENDER_SANDBOX = sandbox=$$(mktemp -d) && trap 'rm -rf "$$sandbox"' EXIT && \
	BLENDER_USER_RESOURCES=$$sandbox

.PHONY: test test-engine test-blender test-blender-lts venvs demo gallery bench build lint format clean

test: test-engine test-blender test-blender-lts

test-engine: $(ENGINE)/editable.stamp
	$(ENGINE)/bin/pytest tests/test_package.py tests/test_docs.py tests/core tests/strands_io

test-blender: $(BLENDER)/editable.stamp
	$(BLENDER)/bin/pytest tests/test_package.py tests/test_docs.py tests/core tests/strands_io \
		tests/blender

test-blender-lts: $(BLENDER_LTS)/editable.stamp
	$(BLENDER_LTS)/bin/pytest tests/test_package.py tests/blender

venvs: $(ENGINE)/editable.stamp $(BLENDER)/editable.stamp $(BLENDER_LTS)/editable.stamp

# -P keeps the current folder off sys.path, so the demo imports the package the way users do.
demo: $(BLENDER)/editable.stamp
	$(BLENDER_SANDBOX) $(BLENDER)/bin/python -P -m oriented_strands.demo

# Bakes and renders examples/ into docs/gallery (about 15 minutes on two cores).
gallery: $(BLENDER)/editable.stamp
	$(BLENDER_SANDBOX) $(BLENDER)/bin/python examples/gallery.py --output docs/gallery

bench: $(BLENDER)/editable.stamp
	$(BLENDER_SANDBOX) $(BLENDER)/bin/python bench/run.py

build: $(BLENDER)/editable.stamp
	$(BLENDER)/bin/python tools/build_extension.py --output-dir dist

lint: $(ENGINE)/editable.stamp
	$(ENGINE)/bin/ruff check .
	$(ENGINE)/bin/ruff format --check .

format: $(ENGINE)/editable.stamp
	$(ENGINE)/bin/ruff check --fix .
	$(ENGINE)/bin/ruff format .

clean:
	rm -rf $(VENV) dist

# A venv is rebuilt from nothing when its pins change, so no package from an older pin set
# stays behind. The stamp is written last: an interrupted install is redone next time.
$(VENV)/%/requirements.stamp: requirements/%.txt requirements/common.txt requirements/bootstrap.txt
	rm -rf $(@D)
	$(PYTHON) -m venv $(@D)
	$(@D)/bin/python -m pip install --quiet --requirement requirements/bootstrap.txt
	$(@D)/bin/python -m pip install --quiet --requirement $<
	touch $@

# The editable install maps `oriented_strands` onto this checkout (pyproject.toml); source
# edits need no reinstall, only changes to pyproject.toml do. Quiet twice: setuptools' fixed
# notices about editable installs and [tool.distutils] would print on every install; errors still
# do.
$(VENV)/%/editable.stamp: $(VENV)/%/requirements.stamp pyproject.toml
	$(@D)/bin/python -m pip install --quiet --quiet --no-deps --editable .
	touch $@

# Without this, make would delete requirements.stamp as an intermediate file of the chain above
# and reinstall the venv on the next run.
.PRECIOUS: $(VENV)/%/requirements.stamp
