// Build beeweb's plotly.js partial bundle from the plotly.js package on npm, the way plotly.js
// builds its own dist/ bundles (its esbuild-config.js and tasks/partial_bundle.mjs, which the
// npm package does not ship): an index that registers only the trace types beeweb draws,
// bundled by esbuild as an IIFE named Plotly, attribute descriptions stripped, minified, with
// plotly's license header.
//
//   node build.mjs        # writes ../../static/vendor/plotly-{beeweb,parcoords}.min.js
//
// Run through ../vendor-plotly.sh, which installs the pinned packages (package-lock.json) and
// checks the output against SHA256SUMS.
import { build } from 'esbuild';
import { environmentPlugin } from 'esbuild-plugin-environment';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const plotlyRoot = path.dirname(require.resolve('plotly.js/package.json'));
const { version } = JSON.parse(readFileSync(path.join(plotlyRoot, 'package.json'), 'utf8'));

// Every trace type beeweb's figures use, in two bundles (modules are required from plotly.js's
// lib/, as its own lib/index-*.js do; scatter is always part of plotly's core):
// - plotly-beeweb.min.js, loaded by every chart page: bar and heatmap
//   (experiments/comparison/charts.py, run_story.py, latency_sweep.py). No "calendars" component:
//   beeweb's dates are Gregorian, and world-calendars is costly to load (the prebuilt partial
//   bundles all hold it).
// - plotly-parcoords.min.js, which static/parcoords.js fetches only on a page with a
//   parallel-coordinates chart (experiments/parcoords.py): parcoords in plotly's strict (CSP-safe)
//   build, its WebGL code precompiled instead of compiled with Function() at run time.
const BUNDLES = [
  { label: 'beeweb: scatter, bar, heatmap', modules: ['./bar', './heatmap'], out: 'plotly-beeweb.min.js' },
  {
    label: 'parcoords strict',
    modules: ['../src/traces/parcoords/strict'],
    out: 'plotly-parcoords.min.js',
  },
];
const VENDOR = path.resolve(here, '../../static/vendor');

// A plotly.js attribute module documents each attribute for plot-schema.json; the browser never
// reads those texts. plotly.js strips them from its dist bundles with a source transform (not in
// the npm package); this plugin drops the same keys (description, hrName, requiredOpts,
// otherOpts) where their value is plain text: a string literal, a list of them, or a list of
// them joined, followed by the next property or the object's end. Anything else (a template
// with ${}, text added to by an expression) is left as it is.
const STR = String.raw`(?:'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")`;
const LIST = String.raw`\[\s*(?:${STR}\s*,\s*)*(?:${STR}\s*,?\s*)?\]`;
const END = String.raw`\s*(?:,|(?=\}))`; // the whole value: a comma or the object's end follows
const META = [
  new RegExp(String.raw`\b(?:description|hrName):\s*(?:${LIST}\.join\(\s*${STR}\s*\)|${STR})${END}`, 'g'),
  new RegExp(String.raw`\b(?:requiredOpts|otherOpts):\s*${LIST}${END}`, 'g'),
];
const stripMeta = {
  name: 'strip-attribute-meta',
  setup(b) {
    b.onLoad({ filter: /\.js$/ }, (args) => {
      let text = readFileSync(args.path, 'utf8');
      for (const pattern of META) text = text.replace(pattern, '');
      return { contents: text, loader: 'js' };
    });
  },
};

// plotly's registry requires maplibre-gl's CSS for the map traces, which neither bundle holds;
// plotly.js inlines it with a style id hashed from the file's absolute path (a bundle that
// differs with the directory it is built in). Here it is an empty module.
const withoutMapCss = {
  name: 'without-map-css',
  setup(b) {
    b.onLoad({ filter: /maplibre-gl\.css$/ }, () => ({ contents: '', loader: 'js' }));
  },
};

function indexSource(modules) {
  const requires = modules.map((m) => `    require('${m}'),`).join('\n');
  return `'use strict';\n\nvar Plotly = require('./core');\n\nPlotly.register([\n${requires}\n]);\n\nmodule.exports = Plotly;\n`;
}

async function bundle(entrySource, label) {
  // esbuild-plugin-environment reads NODE_DEBUG from the environment: keep it out of the file.
  delete process.env.NODE_DEBUG;
  const result = await build({
    stdin: { contents: entrySource, resolveDir: path.join(plotlyRoot, 'lib'), sourcefile: 'index.js' },
    format: 'iife',
    globalName: 'Plotly',
    bundle: true,
    minify: true,
    sourcemap: false,
    write: false,
    plugins: [environmentPlugin({ NODE_DEBUG: false }), withoutMapCss, stripMeta],
    alias: { regl: '@plotly/regl', stream: 'stream-browserify' },
    define: { global: 'window', 'define.amd': 'false' },
    target: 'es2016',
    logLevel: 'warning',
  });
  const code = result.outputFiles.find((f) => f.path.endsWith('.js') || f.path === '<stdout>').text;
  // plotly.js's own dist files wrap this in a UMD factory, `(function (root, factory) {…}(this,
  // () => {…}))`. V8 compiles such a factory lazily: on the page's main thread, once the file
  // has arrived and runs, which was a third of the time to the first chart. The bare IIFE is
  // compiled while the file downloads (script streaming) and defines the same global Plotly;
  // beeweb loads these files as classic scripts only (no CommonJS or AMD loader).
  const header = [
    '/**',
    `* plotly.js (${label} - minified) v${version}`,
    '* Copyright 2012-2026, Plotly, Inc.',
    '* All rights reserved.',
    '* Licensed under the MIT license',
    '*/',
    '',
  ].join('\n');
  return header + code;
}

const sha256 = (text) => createHash('sha256').update(text).digest('hex');

for (const { label, modules, out } of BUNDLES) {
  const text = await bundle(indexSource(modules), label);
  writeFileSync(path.join(VENDOR, out), text);
  console.log(`static/vendor/${out}: ${Buffer.byteLength(text)} bytes, sha256 ${sha256(text)}`);
}
