#!/usr/bin/env bash
# `prefixkit analyze` on a real trace: how much of this traffic can a prefix cache reuse,
# and which routing policy gets closest to the oracle with 8 replicas of 500 blocks each?
#
#   bash examples/analyze_trace.sh                 # the bundled Mooncake conversation trace
#   bash examples/analyze_trace.sh TRACE.jsonl     # your own trace (Mooncake format or a request log)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
trace="${1:-$here/traces/mooncake_conversation.jsonl.gz}"
prefixkit analyze "$trace" --block-size 512 --replicas 8 --capacity 500
prefixkit analyze "$trace" --block-size 512 --replicas 8 --capacity 500 --format json \
    --plot "${PLOT:-policies.png}" > "${JSON:-policies.json}"
echo "wrote ${JSON:-policies.json} and ${PLOT:-policies.png}"
