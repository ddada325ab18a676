#!/usr/bin/env bash
# profile_quick.sh - megatrain-profile --quick on the GPU: exits 0, and its JSON has every field, each positive.
# usage: profile_quick.sh MEGATRAIN-PROFILE OUT.json
set -euo pipefail
tool=$1 out=$2
rm -f "$out"
"$tool" --quick -o "$out"
python3 "$(dirname "$0")/check_profile.py" "$out"
