"""What the GPU proof needs from its machine: the packages to bring to a GPU machine that
cannot reach PyPI (the requirements' closure as installed in .venv, minus what the target
image has), an import stand-in for Playwright where it is absent, and the versions of what
the app imports. Used by benchmarks/gpu_check.py (its `wheels`, `stub-playwright` and `env`
commands) and benchmarks/gpu_wheels.sh. See docs/GPU_CHECK.md."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

# --- wheels to carry ----------------------------------------------------------------------
# The Python packages of the GPU image the proof was prepared for (read 2026-11-17). Their versions
# are the image's own: only what is missing travels.
_IMAGE_PACKAGES = """
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs
botorch build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy
coverage cuda-bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython
diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools formulaic
frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize
hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib
jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities linear-operator
lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes
mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals networkx
ninja numba numba-cuda numpy numpyro onnx onnx-ir onnxruntime onnxscript
opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging
pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client propcache protobuf
psutil pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions pytest
pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil
pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core
scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools
shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard
tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz
torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers
treescope triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug
wheel wrapt xarray xxhash yarl zipp
"""
IMAGE_HAS = frozenset(_IMAGE_PACKAGES.split())
# Not carried, with why; the walk does not follow their requirements either.
NOT_CARRIED = {
    "torch": "the image's CUDA build is what is being checked",
    "playwright": "browser tests are skipped there (no Chromium); 45 MB",
    "ruff": "a linter, not needed to run or test",
    "pydeck": "only st.pydeck_chart imports it (no page does); 11 MB",
    "psycopg": "only a postgresql DATABASE_URL loads it; the tests use SQLite",
}


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def carried_packages(requirement_files: Iterable[Path]) -> list[str]:
    """name==version (as installed here) of every package the requirements need, directly or
    through another, that the GPU image lacks. Markers are read for Python 3.12 on Linux."""
    import importlib.metadata as md

    from packaging.requirements import Requirement

    env = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
           "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
           "implementation_name": "cpython", "platform_python_implementation": "CPython"}
    todo: list[tuple[Requirement, set[str]]] = []
    for path in requirement_files:
        for line in Path(path).read_text().splitlines():
            line = line.split("#")[0].strip()
            if line and not line.startswith("-"):
                req = Requirement(line)
                todo.append((req, set(req.extras)))
    seen: set[str] = set()
    carried: dict[str, str] = {}
    while todo:
        req, extras = todo.pop()
        name = _canonical(req.name)
        if name in seen or name in NOT_CARRIED or name in IMAGE_HAS:
            continue
        seen.add(name)
        dist = md.distribution(req.name)
        carried[name] = dist.version
        for text in dist.requires or []:
            sub = Requirement(text)
            if sub.marker is None or any(sub.marker.evaluate({**env, "extra": e})
                                         for e in extras or {""}):
                todo.append((sub, set(sub.extras)))
    return [f"{name}=={version}" for name, version in sorted(carried.items())]


PLAYWRIGHT_STUB = '''"""Stand-in written by benchmarks/gpu_check.py where Playwright is not
installed: tests/helpers imports these names; the browser tests that use them are not run."""


class _Absent:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("playwright is not installed on this machine")


Browser = Page = Playwright = Locator = _Absent


def sync_playwright():
    raise RuntimeError("playwright is not installed on this machine")
'''


def write_playwright_stub(folder: Path) -> Path:
    package = Path(folder) / "playwright"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text('"""Stand-in: see sync_api."""\n')
    (package / "sync_api.py").write_text(PLAYWRIGHT_STUB)
    return package


# Import names of what the app and its tests need there, carried or the image's own.
NEEDED_MODULES = ("torch", "pandas", "yaml", "pytest", "pytest_timeout", "streamlit", "plotly",
                  "fpdf", "segno", "cryptography", "sqlalchemy", "babel", "uharfbuzz",
                  "demos.measure", "lessons", "quiz", "ui", "i18n")


def environment() -> list[str]:
    """Print Python, torch, CUDA and the versions of what the app imports; return what
    failed to import."""
    import importlib
    import importlib.metadata as md

    import torch

    print(f"python {sys.version.split()[0]} at {sys.executable}")
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"torch.cuda.is_available() = {torch.cuda.is_available()}")
    if torch.cuda.is_available():
        free, total = torch.cuda.mem_get_info()
        print(f"device {torch.cuda.get_device_name()}: {free / 2**30:.1f} of "
              f"{total / 2**30:.1f} GiB free, capability {torch.cuda.get_device_capability()}")
    failed = []
    for module in NEEDED_MODULES:
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - listed, the script goes on
            failed.append(f"{module}: {type(exc).__name__}: {exc}")
            continue
        top = module.split(".")[0]
        dist = md.packages_distributions().get(top, [top])[0]
        try:
            version = md.version(dist)
        except md.PackageNotFoundError:
            version = "(this repository)"
        print(f"  {module:16} {version}")
    for line in failed:
        print(f"  MISSING {line}")
    return failed
