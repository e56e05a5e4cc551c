# Gradient Checkpointing Lab: `make run` starts the app, `make test` runs every test.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8501
ADDRESS ?= 0.0.0.0
CHROMIUM := /usr/bin/chromium

.PHONY: run dev chromium cjk-font test-packages test-setup test test-unit test-browser test-latest test-frameworks lint bench clean messages

$(BIN)/python:
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Reinstall only when the pinned requirements change.
$(VENV)/.runtime-installed: requirements.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.dev-installed: requirements.txt requirements-dev.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $(VENV)/.runtime-installed $@

# Translations: locale/<lang>/LC_MESSAGES/messages.po is the source; its .mo is compiled
# here whenever the .po changes (never committed). `make messages` after changing texts.
MO_FILES := $(patsubst %.po,%.mo,$(wildcard locale/*/LC_MESSAGES/messages.po))

locale/%/LC_MESSAGES/messages.mo: locale/%/LC_MESSAGES/messages.po | $(VENV)/.runtime-installed
	$(BIN)/pybabel -q compile -i $< -o $@

messages: $(VENV)/.runtime-installed
	$(BIN)/python -m i18n messages

run: $(VENV)/.runtime-installed cjk-font $(MO_FILES)
	$(BIN)/python -m ui.server --server.port $(PORT) --server.address $(ADDRESS)

# Development: file watcher on, error details shown.
dev: $(VENV)/.runtime-installed $(MO_FILES)
	STREAMLIT_CLIENT_SHOW_ERROR_DETAILS=full $(BIN)/python -m ui.server \
		--server.port $(PORT) --server.fileWatcherType auto --server.runOnSave true

# Debian packages, installed when missing: Chromium for the browser tests, PostgreSQL for
# the two-server test (tests/quiz/test_postgres.py), the CJK font for certificates in
# Chinese, Japanese and Korean names. Each is named below only while its file is missing.
CJK_FONT ?= /usr/share/fonts/truetype/wqy/wqy-microhei.ttc
APT_LOCK_TIMEOUT ?= 20
APT_GET := apt-get -o DPkg::Lock::Timeout=$(APT_LOCK_TIMEOUT)
MISSING_CHROMIUM = $(if $(wildcard $(CHROMIUM)),,chromium)
MISSING_POSTGRESQL = $(if $(wildcard /usr/lib/postgresql/*/bin/initdb),,postgresql)
MISSING_CJK_FONT = $(if $(wildcard $(CJK_FONT)),,fonts-wqy-microhei)
# Node.js runs the independent Open Badges verifier (tests/quiz/obverify).
MISSING_NODE = $(if $(shell command -v npm 2>/dev/null),,nodejs npm)

# $(call apt-install,PACKAGES,WHAT FOR): as root, one apt-get install (after an update when
# the plain install fails); otherwise the command to run. Nothing when PACKAGES is empty.
apt-install = if [ -n "$(strip $(1))" ]; then \
	if [ "$$(id -u)" = "0" ]; then \
		($(APT_GET) install -y --no-install-recommends $(1) || \
		 ($(APT_GET) update && $(APT_GET) install -y --no-install-recommends $(1))); \
	else echo "Missing $(strip $(1)): run 'sudo apt-get install $(strip $(1))' $(2)"; fi; \
	fi

chromium:
	@$(call apt-install,$(MISSING_CHROMIUM),for the browser tests)

# Optional for `make run`: a busy package manager (another apt-get or unattended-upgrades
# holding its lock), no network or no root only prints a warning, and the app starts; a
# certificate in a CJK name is then refused with a clear message until the font is there.
cjk-font:
	@$(call apt-install,$(MISSING_CJK_FONT),for CJK names) || \
	echo "Warning: the optional CJK font (fonts-wqy-microhei) could not be installed (is another package manager running?); the app starts without it, certificates in CJK names are refused until it is installed. Try again later with 'make cjk-font'." >&2

# What the tests need from Debian, in one apt-get call, while pip installs the Python
# packages beside it.
test-packages:
	@$(call apt-install,$(MISSING_CHROMIUM) $(MISSING_POSTGRESQL) $(MISSING_CJK_FONT) $(MISSING_NODE),for the tests)

# The independent Open Badges verifier's npm packages (Digital Bazaar's verifier, the
# JSON-LD contexts, Ajv), as package-lock.json pins them.
OBVERIFY := tests/quiz/obverify
$(OBVERIFY)/node_modules/.installed: $(OBVERIFY)/package-lock.json
	cd $(OBVERIFY) && npm ci --no-audit --no-fund --silent
	touch $@

test-setup:
	@$(MAKE) --no-print-directory -j2 test-packages $(VENV)/.dev-installed
	@$(MAKE) --no-print-directory $(OBVERIFY)/node_modules/.installed

# Every test: the browser tests in one process (they share one app server and one Chromium)
# beside the unit and AppTest tests in TEST_WORKERS processes (pytest-xdist). The browser
# part leaves most of a core idle while a page draws, so the two run at once; its report
# follows the unit part's. Both parts always run; "no tests selected" (exit 5) in one part
# is no failure. Three unit workers on two cores: many tests wait (for a child process, a
# server, a database), and a third worker runs while the other two wait.
TEST_WORKERS ?= 3
BROWSER_LOG := tests/artifacts/browser-part.log
test: test-setup $(MO_FILES)
	@status=0; mkdir -p $(dir $(BROWSER_LOG)); \
	$(BIN)/python -m pytest -m browser -p no:cacheprovider $(PYTEST_ARGS) > $(BROWSER_LOG) 2>&1 & \
	browser=$$!; \
	$(BIN)/python -m pytest -m "not browser" -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS); \
	s=$$?; [ $$s -eq 0 ] || [ $$s -eq 5 ] || status=$$s; \
	wait $$browser; s=$$?; cat $(BROWSER_LOG); \
	[ $$s -eq 0 ] || [ $$s -eq 5 ] || status=$$s; \
	exit $$status

# One layer at a time: unit tests (engine, quiz, lessons), or the browser tests alone.
test-unit: $(VENV)/.dev-installed $(OBVERIFY)/node_modules/.installed $(MO_FILES)
	$(BIN)/python -m pytest -m "not browser" -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

test-browser: $(VENV)/.dev-installed chromium $(MO_FILES)
	$(BIN)/python -m pytest -m browser $(PYTEST_ARGS)

# The newest releases, checked on demand (not part of `make test`: it downloads several GB,
# torch's CUDA build among them). A second virtualenv gets the newest torch, transformers,
# peft, accelerate and diffusers the registry serves (PIP_CONFIG_FILE=/dev/null: no local pip caps for
# this environment only) beside the project's other pins; the tests that rest on library
# behaviour run in it and benchmarks/latest-releases.md records versions and what differs.
LATEST_VENV := .venv-latest
LATEST_LIBRARIES := torch transformers peft accelerate diffusers
LATEST_INSTALL_TIMEOUT ?= 3600
$(LATEST_VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(LATEST_VENV) || python3 -m venv $(LATEST_VENV)
	grep -hvE '^(-r |($(subst $() ,|,$(LATEST_LIBRARIES)))==)' requirements.txt requirements-dev.txt \
		> $(LATEST_VENV)/other-pins.txt
	PIP_CONFIG_FILE=/dev/null timeout $(LATEST_INSTALL_TIMEOUT) $(LATEST_VENV)/bin/python -m pip install \
		--quiet --upgrade --upgrade-strategy only-if-needed pip
	PIP_CONFIG_FILE=/dev/null timeout $(LATEST_INSTALL_TIMEOUT) $(LATEST_VENV)/bin/python -m pip install \
		--quiet --upgrade -r $(LATEST_VENV)/other-pins.txt $(LATEST_LIBRARIES)
	touch $@

test-latest: $(LATEST_VENV)/.installed $(VENV)/.dev-installed $(MO_FILES)
	$(BIN)/python -m tools.latest_releases --python $(LATEST_VENV)/bin/python \
		--report benchmarks/latest-releases.md -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# The planner's DeepSpeed config and Megatron-LM flags, read by the frameworks themselves
# (not part of `make test`). A third virtualenv gets torch (the local CPU wheel), DeepSpeed
# and Megatron-Core (0.16.1: the newest for Python 3.11; 0.17 needs 3.12), never the app's
# requirements. Megatron-LM's argument parser is not in the megatron-core package: a
# checkout of its training code at the matching tag is cloned into the environment, or
# taken from MEGATRON_LM_SRC; without either the flags are checked against the vendored
# table of that parser's options (tests/frameworks/megatron_source.py).
FRAMEWORKS_VENV := .venv-frameworks
FRAMEWORKS_PINS := torch==2.13.0 deepspeed==0.19.8 megatron-core==0.16.1 six regex \
	Babel==2.19.0 pytest==9.1.1 pytest-timeout==2.4.0
MEGATRON_LM_TAG := core_v0.16.1
MEGATRON_LM_SRC ?= $(FRAMEWORKS_VENV)/Megatron-LM
$(FRAMEWORKS_VENV)/.installed: Makefile
	$(PYTHON) -m venv $(FRAMEWORKS_VENV) || python3 -m venv $(FRAMEWORKS_VENV)
	$(FRAMEWORKS_VENV)/bin/python -m pip install --quiet torch==2.13.0
	DS_BUILD_OPS=0 $(FRAMEWORKS_VENV)/bin/python -m pip install --quiet $(FRAMEWORKS_PINS)
	touch $@

$(FRAMEWORKS_VENV)/Megatron-LM/megatron/training/arguments.py:
	-git clone --quiet --depth 1 --branch $(MEGATRON_LM_TAG) --filter=blob:none --sparse \
		https://github.com/NVIDIA/Megatron-LM $(FRAMEWORKS_VENV)/Megatron-LM && \
		git -C $(FRAMEWORKS_VENV)/Megatron-LM sparse-checkout set megatron/training megatron/legacy

test-frameworks: $(FRAMEWORKS_VENV)/.installed $(FRAMEWORKS_VENV)/Megatron-LM/megatron/training/arguments.py $(VENV)/.runtime-installed $(MO_FILES)
	MEGATRON_LM_SRC=$(if $(wildcard $(MEGATRON_LM_SRC)/megatron/training/arguments.py),$(abspath $(MEGATRON_LM_SRC))) \
		$(FRAMEWORKS_VENV)/bin/python -m pytest --noconftest -p no:cacheprovider \
		tests/frameworks $(PYTEST_ARGS)

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check .

bench: $(VENV)/.runtime-installed
	$(BIN)/python -m demos bench

clean:
	rm -rf $(VENV) $(LATEST_VENV) $(FRAMEWORKS_VENV) .pytest_cache .ruff_cache tests/artifacts $(OBVERIFY)/node_modules
