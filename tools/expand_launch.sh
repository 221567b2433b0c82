#!/bin/bash
# Expand a Megatron-LM launch script as bash does, with every launcher stubbed, and write the
# argv that pretrain_gpt.py would receive (one word per line) to $2.
# Usage: expand_launch.sh SCRIPT OUT [extra bash args...]   (run inside a scratch copy of the repo
# tree that has a dummy pretrain_gpt.py; nothing is launched: torchrun/python/srun/sbatch/uv/nsys/pip
# are shell functions that record their argv).
set -u
SCRIPT=$1; OUT=$2; shift 2
export ARGV_OUT=$OUT
_record() { printf '%s\n' "$@" > "$ARGV_OUT"; }
torchrun() { _record "$@"; }
python() { _record "$@"; }
python3() { _record "$@"; }
uv() { shift; "$@"; }                      # 'uv run X ...' -> X ...
nsys() { while [ $# -gt 0 ] && [ "$1" != python ]; do shift; done; "$@"; }
pip() { :; }
srun() { while [ $# -gt 0 ]; do if [ "$1" = -c ]; then bash -c "$2"; return; fi; shift; done; }
sbatch() { bash -s; }
export -f _record torchrun python python3 uv nsys pip srun sbatch
bash "$SCRIPT" "$@" >/dev/null 2>&1
# keep only what follows the entry point
awk 'f{print} /pretrain_gpt\.py$/{f=1}' "$OUT" > "$OUT.tmp" && mv "$OUT.tmp" "$OUT"
