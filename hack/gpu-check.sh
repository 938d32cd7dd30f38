#!/usr/bin/env bash
# Checks tau-nodeagent against this machine's real NVIDIA driver: builds the
# agent, runs one cycle in dry-run (--once -o json --dry-run: it writes nothing,
# and needs no cluster), and prints the GPUs and every check's result. See
# docs/gpu-check.md.
#
#   hack/gpu-check.sh [--out DIR] [agent flags...]
#
# The JSON report is kept in DIR (default: a temporary directory) as
# report.json, with nvidia-smi's view beside it. Exit status: the agent's (0
# when it ran), or 3 when NVML was not usable.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=""
if [ "${1:-}" = "--out" ]; then
	out=$2
	shift 2
fi
out=${out:-$(mktemp -d)}
mkdir -p "$out"

export CGO_CFLAGS=${CGO_CFLAGS:--Wno-deprecated-declarations}
echo "gpu-check: building tau-nodeagent into $out" >&2
(cd "$root" && go build -o "$out/tau-nodeagent" ./cmd/tau-nodeagent)

if command -v nvidia-smi >/dev/null; then
	nvidia-smi -L >"$out/nvidia-smi.txt" 2>&1 || true
	nvidia-smi -q -d ECC,TEMPERATURE,PERFORMANCE,ROW_REMAPPER,PAGE_RETIREMENT >>"$out/nvidia-smi.txt" 2>&1 || true
	echo "gpu-check: nvidia-smi sees:" >&2
	grep '^GPU ' "$out/nvidia-smi.txt" >&2 || true
else
	echo "gpu-check: nvidia-smi not found" >&2
fi

# Unset NODE_NAME: a dry run on a bare machine reads no cluster.
status=0
NODE_NAME="" "$out/tau-nodeagent" --once -o json --dry-run "$@" >"$out/report.json" || status=$?
echo "gpu-check: report in $out/report.json (agent exit status $status)" >&2

if command -v jq >/dev/null; then
	jq -r '
		"NVML usable: \(.nvml.usable)  driver: \(.nvml.driverVersion // "-")  \(.nvml.message // "")",
		(.gpus // [] | .[] |
			"GPU \(.index) \(.uuid) \(.name // "")  temp=\(.temperatureC // "-")C slowdown=\(.slowdownC // "-")C power=\(.powerW // "-")W nvlinks-up=\(.nvlinksUp // "-")",
			(.checks[] | "    \(.check)\t\(.severity)\(if .notApplicable then " (n/a)" else "" end)\t\(.message)")),
		(.nodeChecks // [] | .[] | "node \(.check)\t\(.severity)\t\(.message)"),
		(.xids // [] | .[] | "XID \(.xid) on GPU \(.gpu) (\(.uuid))"),
		"verdict: \(.verdict.status) \(.verdict.reason): \(.verdict.message)",
		"would taint: \(.verdict.taint)"' "$out/report.json"
else
	cat "$out/report.json"
fi

if [ "$status" -ne 0 ]; then
	exit "$status"
fi
if grep -q '"usable": false' "$out/report.json"; then
	exit 3
fi
