#!/usr/bin/env bash
# Run on a machine that reaches PyPI, for a GPU machine that does not (docs/GPU_CHECK.md).
# Downloads into .whl/ the Python 3.12 manylinux wheels of every runtime and test package the
# GPU image lacks (benchmarks/gpu_check.py wheels: the requirements' closure as installed in
# .venv, minus the image's packages, torch and the browser/lint tools), checks their size, and
# keeps .whl/ out of git. benchmarks/gpu_check.sh installs them on the GPU machine.
#   bash benchmarks/gpu_wheels.sh     # fails over MAX_MIB (48) of wheels, or over 60 MiB with the
#                                     # tree that travels with them
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
MAX_MIB=${MAX_MIB:-48}
MAX_TREE_MIB=${MAX_TREE_MIB:-60}

mkdir -p .git/info
grep -qxF '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude

mapfile -t wanted < <("$PY" benchmarks/gpu_check.py wheels)
echo "carrying ${#wanted[@]} packages: ${wanted[*]}"
platforms=()
for n in $(seq 17 39); do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
platforms+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)

rm -rf .whl
mkdir .whl
"$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${platforms[@]}" -d .whl "${wanted[@]}" 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
# One wheel per package: two versions of one stop the whole install there.
got=$(ls .whl/*.whl | wc -l)
if [ "$got" -ne "${#wanted[@]}" ]; then
    echo "FAILED: ${#wanted[@]} packages wanted, $got wheels in .whl/" >&2
    exit 1
fi
bytes=$(du -cb .whl/*.whl | tail -1 | cut -f1)
mib=$(( (bytes + 1048575) / 1048576 ))
ls -S -l .whl | awk 'NR > 1 {printf "  %8.1f MiB  %s\n", $5 / 1048576, $9}'
# What travels: tracked files and untracked ones git does not ignore, plus .whl/.
tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 du -cb 2>/dev/null \
       | awk '$2 == "total" {s += $1} END {print s + 0}')
tree_mib=$(( (tree + bytes + 1048575) / 1048576 ))
echo "wheels: $mib MiB in $got files (limit $MAX_MIB); with the working tree: $tree_mib MiB" \
     "(limit $MAX_TREE_MIB)"
if [ "$mib" -gt "$MAX_MIB" ] || [ "$tree_mib" -gt "$MAX_TREE_MIB" ]; then
    echo "FAILED: too much to carry" >&2
    exit 1
fi
