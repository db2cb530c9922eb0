#!/usr/bin/env bash
# Fetch plotly.js's prebuilt cartesian partial bundle (scatter, bar, heatmap, box, histogram,
# contour, …: every trace type experiments/comparison/charts.py draws) from npm, check the
# tarball against the recorded sha512 (npm's "integrity") and vendor it as
# static/vendor/plotly-cartesian.min.js. Re-run after changing VERSION and INTEGRITY (from
# `npm view plotly.js-cartesian-dist-min@<version> dist.integrity`); see static/vendor/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGE=plotly.js-cartesian-dist-min
VERSION=4.1.1
INTEGRITY=sha512-o8GrFeusncwBIxbBynRJpY4pkgVB6caM+JLpwrLYbbsO7dZ8FJ+SVN2Fr+L7kiG/Z6w4P5O0Jus/Qr5EefHVeg==
OUT=static/vendor/plotly-cartesian.min.js

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$PACKAGE@$VERSION" >/dev/null)
tarball="$tmp/$PACKAGE-$VERSION.tgz"
actual="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)"
if [ "$actual" != "$INTEGRITY" ]; then
  echo "checksum mismatch for $PACKAGE@$VERSION: expected $INTEGRITY, got $actual" >&2
  exit 1
fi
tar -xzf "$tarball" -C "$tmp" package/plotly-cartesian.min.js
cp "$tmp/package/plotly-cartesian.min.js" "$OUT"
echo "$OUT: $PACKAGE@$VERSION ($(wc -c <"$OUT") bytes, sha256 $(sha256sum "$OUT" | cut -d' ' -f1))"
