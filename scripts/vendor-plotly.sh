#!/usr/bin/env bash
# Build beeweb's plotly.js partial bundles into static/vendor/ from the npm registry, pinned:
# scripts/plotly/package-lock.json fixes plotly.js 4.1.1, esbuild and every dependency by
# sha512 (npm ci refuses a tarball that differs), scripts/plotly/build.mjs bundles only the
# trace types beeweb draws, and the output must match scripts/plotly/SHA256SUMS byte for byte.
# - plotly-beeweb.min.js: scatter, bar, heatmap; every chart page loads it.
# - plotly-parcoords.min.js: parcoords (strict, CSP-safe); static/parcoords.js fetches it only
#   on a page that draws parallel coordinates.
#
#   scripts/vendor-plotly.sh            # rebuild and check against SHA256SUMS
#   scripts/vendor-plotly.sh --update   # after changing a version or a bundle's traces on
#                                       # purpose: rebuild and record the new checksums
# Needs node >= 18 and npm; see static/vendor/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."

(cd scripts/plotly && npm ci --silent --no-audit --no-fund --ignore-scripts && node build.mjs)
if [ "${1:-}" = "--update" ]; then
  sha256sum static/vendor/plotly-beeweb.min.js static/vendor/plotly-parcoords.min.js \
    >scripts/plotly/SHA256SUMS
  echo "recorded in scripts/plotly/SHA256SUMS"
else
  sha256sum -c scripts/plotly/SHA256SUMS
fi
