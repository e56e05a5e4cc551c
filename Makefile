# Gradient Checkpointing Lab: `make run` starts the app, `make test` runs every test.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8501
ADDRESS ?= 0.0.0.0
CHROMIUM := /usr/bin/chromium

.PHONY: run dev chromium postgresql cjk-font test-packages test-setup test test-unit test-browser lint bench clean messages

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

chromium:
	@if [ ! -x $(CHROMIUM) ]; then \
		if [ "$$(id -u)" = "0" ]; then \
			(apt-get install -y --no-install-recommends chromium || \
			 (apt-get update && apt-get install -y --no-install-recommends chromium)); \
		else echo "Chromium is missing: run 'sudo apt-get install chromium' for the browser tests"; fi; \
	fi

# PostgreSQL for the two-server test (tests/quiz/test_postgres.py), and the CJK font for
# certificates in Chinese, Japanese and Korean names: Debian packages, installed when missing.
postgresql:
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		if [ "$$(id -u)" = "0" ]; then \
			(apt-get install -y --no-install-recommends postgresql || \
			 (apt-get update && apt-get install -y --no-install-recommends postgresql)); \
		else echo "PostgreSQL is missing: run 'sudo apt-get install postgresql' for its test"; fi; \
	fi

# Optional for `make run`: a busy package manager (another apt-get or unattended-upgrades
# holding its lock), no network or no root only prints a warning, and the app starts; a
# certificate in a CJK name is then refused with a clear message until the font is there.
CJK_FONT ?= /usr/share/fonts/truetype/wqy/wqy-microhei.ttc
APT_LOCK_TIMEOUT ?= 20
APT_GET := apt-get -o DPkg::Lock::Timeout=$(APT_LOCK_TIMEOUT)

cjk-font:
	@if [ ! -f $(CJK_FONT) ]; then \
		if [ "$$(id -u)" = "0" ]; then \
			($(APT_GET) install -y --no-install-recommends fonts-wqy-microhei || \
			 ($(APT_GET) update && $(APT_GET) install -y --no-install-recommends fonts-wqy-microhei)) || \
			echo "Warning: the optional CJK font (fonts-wqy-microhei) could not be installed (is another package manager running?); the app starts without it, certificates in CJK names are refused until it is installed. Try again later with 'make cjk-font'." >&2; \
		else echo "No CJK font: run 'sudo apt-get install fonts-wqy-microhei' for CJK names"; fi; \
	fi

# Every test: the unit and AppTest tests in TEST_WORKERS processes (pytest-xdist), then the
# browser tests in one (they share one app server and one Chromium, and time what a learner
# waits). Both parts always run; "no tests selected" (exit 5) in one part is no failure.
TEST_WORKERS ?= 2
# What the tests need from Debian (Chromium, PostgreSQL, the CJK font), in one apt-get
# call for those missing, while pip installs the Python packages beside it.
test-packages:
	@missing=""; \
	[ -x $(CHROMIUM) ] || missing="$$missing chromium"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	[ -f $(CJK_FONT) ] || missing="$$missing fonts-wqy-microhei"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = "0" ]; then \
			($(APT_GET) install -y --no-install-recommends $$missing || \
			 ($(APT_GET) update && $(APT_GET) install -y --no-install-recommends $$missing)); \
		else echo "Missing for the tests:$$missing (run 'sudo apt-get install$$missing')"; fi; \
	fi

test-setup:
	@$(MAKE) --no-print-directory -j2 test-packages $(VENV)/.dev-installed

test: test-setup $(MO_FILES)
	@status=0; \
	$(BIN)/python -m pytest -m "not browser" -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS); \
	s=$$?; [ $$s -eq 0 ] || [ $$s -eq 5 ] || status=$$s; \
	$(BIN)/python -m pytest -m browser $(PYTEST_ARGS); \
	s=$$?; [ $$s -eq 0 ] || [ $$s -eq 5 ] || status=$$s; \
	exit $$status

# One layer at a time: unit tests (engine, quiz, lessons), or the browser tests alone.
test-unit: $(VENV)/.dev-installed $(MO_FILES)
	$(BIN)/python -m pytest -m "not browser" -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

test-browser: $(VENV)/.dev-installed chromium $(MO_FILES)
	$(BIN)/python -m pytest -m browser $(PYTEST_ARGS)

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check .

bench: $(VENV)/.runtime-installed
	$(BIN)/python -m demos bench

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache tests/artifacts
