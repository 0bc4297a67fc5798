#!/bin/sh
# Print the include directory holding nvml.h or cuda.h (argument: nvml | cuda), taken
# from the PyPI header packages installed in the project's Python environment
# (nvidia-nvml-dev-cu12, nvidia-cuda-runtime-cu12).  Override with
# `make NVML_INCLUDE=... CUDA_INCLUDE=...` to use a CUDA toolkit instead.
set -eu
which="$1"
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-}
if [ -z "$python" ]; then
    if [ -x "$here/../.venv/bin/python" ]; then python="$here/../.venv/bin/python"; else python=python3; fi
fi
case "$which" in
    nvml) sub=nvml_dev; header=nvml.h ;;
    cuda) sub=cuda_runtime; header=cuda.h ;;
    *) echo "usage: $0 nvml|cuda" >&2; exit 2 ;;
esac
dir=$("$python" - "$sub" "$header" <<'PY'
import os, sys
sub, header = sys.argv[1], sys.argv[2]
try:
    import nvidia
except ImportError:
    sys.exit(0)
for base in nvidia.__path__:
    inc = os.path.join(base, sub, "include")
    if os.path.isfile(os.path.join(inc, header)):
        print(inc)
        break
PY
)
if [ -z "$dir" ]; then
    for d in /usr/local/cuda/include /usr/include; do
        if [ -f "$d/$header" ]; then dir=$d; break; fi
    done
fi
if [ -z "$dir" ]; then
    echo "find-headers.sh: $header not found; run pip install -e '.[dev]' or pass $(echo "$which" | tr a-z A-Z)_INCLUDE=DIR to make" >&2
    exit 1
fi
echo "$dir"
