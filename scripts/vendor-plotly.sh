#!/usr/bin/env bash
# Fetch plotly.js's prebuilt bundles from npm, check each tarball against its recorded sha512
# (npm's "integrity") and vendor it under static/vendor/:
# - plotly.js-cartesian-dist-min -> plotly-cartesian.min.js: scatter, bar, heatmap, box, …:
#   every trace type experiments/comparison/charts.py draws; every chart page loads it.
# - plotly.js-strict-dist-min -> plotly-strict.min.js: the CSP-safe bundle (WebGL code
#   precompiled, no Function()) with the parcoords trace of experiments/parcoords.py;
#   static/parcoords.js fetches it only on a page that draws parallel coordinates.
# Re-run after changing a VERSION and INTEGRITY (from
# `npm view <package>@<version> dist.integrity`); see static/vendor/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

vendor() {  # PACKAGE VERSION INTEGRITY FILE-IN-PACKAGE OUT
  local package=$1 version=$2 integrity=$3 file=$4 out=$5
  (cd "$tmp" && npm pack --silent "$package@$version" >/dev/null)
  local tarball="$tmp/$package-$version.tgz"
  local actual
  actual="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)"
  if [ "$actual" != "$integrity" ]; then
    echo "checksum mismatch for $package@$version: expected $integrity, got $actual" >&2
    exit 1
  fi
  tar -xzf "$tarball" -C "$tmp" "package/$file"
  cp "$tmp/package/$file" "$out"
  echo "$out: $package@$version ($(wc -c <"$out") bytes, sha256 $(sha256sum "$out" | cut -d' ' -f1))"
}

vendor plotly.js-cartesian-dist-min 4.1.1 \
  sha512-o8GrFeusncwBIxbBynRJpY4pkgVB6caM+JLpwrLYbbsO7dZ8FJ+SVN2Fr+L7kiG/Z6w4P5O0Jus/Qr5EefHVeg== \
  plotly-cartesian.min.js static/vendor/plotly-cartesian.min.js
vendor plotly.js-strict-dist-min 4.1.1 \
  sha512-/M2gRAF8LeqafKIO/bUU+DQk7RlonVbwpPb2G/jZsfqCl/DttBfvF+wQfZ6vT9y9EKy47eDI/zfIWC/uA1L6TQ== \
  plotly-strict.min.js static/vendor/plotly-strict.min.js
