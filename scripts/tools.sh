#!/usr/bin/env bash
# Installs the command-line tools the test suite calls when they are missing, from Debian's packages:
#   kubectl  (kubernetes-client)  the manifest tests build the deploy/ overlays with `kubectl kustomize`;
#   promtool (prometheus)         the metrics test lints /metrics with Prometheus's own checker.
# Sourced by scripts/test.sh and .ci/run; safe to run again (does nothing when everything is there).
set -euo pipefail

# One line over a whole run's cargo test output: "N passed, M failed" (the suites' own closing line).
summarise_test_log() {
  awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed;/) p += $i; if ($(i+1) ~ /^failed;/) f += $i } }
       END { printf "%d passed, %d failed\n", p, f }' "$1"
}

ensure_tools() {
  local missing=()
  command -v kubectl >/dev/null || missing+=(kubernetes-client)
  command -v promtool >/dev/null || missing+=(prometheus)
  if [[ ${#missing[@]} -eq 0 ]]; then
    return 0
  fi
  local sudo=""
  if [[ $(id -u) -ne 0 ]]; then
    if ! command -v sudo >/dev/null; then
      echo "scripts/tools.sh: need ${missing[*]} (Debian packages) and cannot install them without root or sudo" >&2
      return 1
    fi
    sudo=sudo
  fi
  echo "scripts/tools.sh: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  # The prometheus package would start a server under systemd; nothing here needs one, only its promtool.
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  ensure_tools
fi
