#!/usr/bin/env bash
# Test-only: /usr/bin/python3 with lm-eval and the transformers it was resolved with (tools/setup.sh's
# ensure_interop_python) and the pinned torch on its path. Installs nothing: a missing package is the test's
# to report as SKIPPED.
source "$(dirname "$0")/../../tools/setup.sh"
PYTHONPATH="$(causal_lm_eval_pythonpath)" exec /usr/bin/python3 "$@"
