// Imports point down the layer picture of docs/architecture.md, and only down. The picture is the rule: this
// script reads its rows (top row = highest layer) and fails, naming file and target, when a module imports one
// of its own row or of a row above; when a unit under src/ has no row; when a custody backend (`custody/*/`,
// each subfolder a unit of its own) is imported from outside itself (backends are loaded through the registry);
// when the files of one unit import each other in a circle; and when a unit below signing/ imports errors.ts, the
// protocol's error body with its HTTP statuses (those units throw domain-error.ts's errors, which http/answers.ts
// maps to answers in one table). A unit is a folder directly under src/ or a file directly in src/. Specifiers
// read: `import`, `import type`, `export ... from`, `import()`, and worker entries written as
// `new URL('./x.ts', import.meta.url)`. Run by `npm test` before the tests.
//   node scripts/check-layers.mjs [srcDir] [layersDoc]
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

const root = resolve(process.argv[2] ?? 'src');
const layersDoc = resolve(process.argv[3] ?? 'docs/architecture.md');
const MARKER = '<!-- layers: checked by scripts/check-layers.mjs -->';

// Rows of the picture after MARKER, lowest first: each a list of units ('store/', 'service.ts', 'custody/*/').
function readRows(file) {
  const text = readFileSync(file, 'utf8');
  const at = text.indexOf(MARKER);
  if (at < 0) throw new Error(`${file}: no line "${MARKER}" before the layer picture`);
  const fence = text.indexOf('```', at);
  const block = text.slice(text.indexOf('\n', fence) + 1, text.indexOf('```', fence + 3));
  const rows = block
    .split('\n')
    .filter((line) => line.trim().startsWith('|'))
    .map((line) => [...line.matchAll(/(?<=^|\s)([a-z][a-z0-9-]*(?:\/\*)?\/|[a-z][a-z0-9-]*\.ts)(?=\s|$)/g)])
    .map((matches) => matches.map((m) => m[1]))
    .filter((units) => units.length > 0);
  return rows.reverse();
}

function listFiles(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return listFiles(path);
    return name.endsWith('.ts') ? [path] : [];
  });
}

const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(?\s*|\bnew URL\(\s*)['"](\.{1,2}\/[^'"]+)['"]/g;

/** file (relative to src/) -> files it imports (relative to src/) */
function importGraph() {
  const graph = new Map();
  for (const file of listFiles(root)) {
    const targets = new Set();
    for (const [, spec] of readFileSync(file, 'utf8').matchAll(SPECIFIER)) {
      if (!spec.endsWith('.ts') && !spec.endsWith('.js')) continue;
      const target = resolve(dirname(file), spec.replace(/\.js$/, '.ts'));
      if (target.startsWith(root + sep)) targets.add(relative(root, target));
    }
    graph.set(relative(root, file), targets);
  }
  return graph;
}

const rows = readRows(layersDoc);
const rankOf = new Map(rows.flatMap((units, rank) => units.map((u) => [u, rank])));
const pluginParents = new Set(
  rows
    .flat()
    .filter((u) => u.endsWith('/*/'))
    .map((u) => u.slice(0, -2)),
);

// { unit, pattern }: pattern is the picture's name for it ('custody/*/' for the unit 'custody/pkcs11/')
function unitOf(file) {
  const parts = file.split(sep);
  if (parts.length === 1) return { unit: parts[0], pattern: parts[0] };
  const folder = `${parts[0]}/`;
  if (parts.length > 2 && pluginParents.has(folder)) return { unit: `${folder}${parts[1]}/`, pattern: `${folder}*/` };
  return { unit: folder, pattern: folder };
}

/** One cycle per strongly connected component with more than one node (Tarjan), each as a path a -> b -> a. */
function cycles(edges) {
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const found = [];
  let next = 0;
  const visit = (v) => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
    }
    if (low.get(v) !== index.get(v)) return;
    const component = [];
    let w;
    do {
      w = stack.pop();
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1) found.push(pathThrough(edges, new Set(component)).join(' -> '));
  };
  for (const v of edges.keys()) if (!index.has(v)) visit(v);
  return found;
}

/** A shortest walk from the first member back to itself inside the component. */
function pathThrough(edges, members) {
  const start = [...members].sort()[0];
  const previous = new Map([[start, null]]);
  const queue = [start];
  while (queue.length) {
    const v = queue.shift();
    for (const w of edges.get(v) ?? []) {
      if (!members.has(w)) continue;
      if (w === start) {
        const path = [start];
        for (let u = v; u !== start; u = previous.get(u)) path.splice(1, 0, u);
        return [...path, start];
      }
      if (!previous.has(w)) {
        previous.set(w, v);
        queue.push(w);
      }
    }
  }
  return [...members];
}

// The error body of the protocol (HTTP status, `error`, `error_description`) is the signDoc pipeline's and the
// HTTP layer's. trust/ and introspection/ still refuse SADs and introspection answers in its terms.
const ERROR_BODY = 'errors.ts';
const EDGE = 'signing/';
const STILL_ANSWERING = new Set(['trust/', 'introspection/']);

/** What is wrong with `file` importing `target` across units, or undefined. */
function crossing(file, from, target, to) {
  const edge = `${file} imports ${target}`;
  if (to.unit === ERROR_BODY && rankOf.get(from.pattern) < rankOf.get(EDGE) && !STILL_ANSWERING.has(from.unit))
    return `${edge}: ${from.unit} is below ${EDGE}, so it throws domain errors (domain-error.ts), answered by http/`;
  if (to.pattern !== to.unit)
    return `${edge}: ${to.pattern} backends are loaded through their registry, never imported`;
  const [a, b] = [rankOf.get(from.pattern), rankOf.get(to.pattern)];
  if (b < a) return undefined;
  const where = b === a ? 'its own row' : 'a row above it';
  return `${edge}: ${from.unit} may import only rows below it, and ${to.unit} is in ${where}`;
}

const files = importGraph();
const problems = new Set();
const perUnit = new Map();
for (const [file, targets] of files) {
  const from = unitOf(file);
  if (!rankOf.has(from.pattern)) problems.add(`${from.unit} has no row in the layer picture of ${layersDoc}`);
  for (const target of targets) {
    const to = unitOf(target);
    if (to.unit === from.unit) {
      if (!perUnit.has(from.unit)) perUnit.set(from.unit, new Map());
      const edges = perUnit.get(from.unit);
      if (!edges.has(file)) edges.set(file, new Set());
      edges.get(file).add(target);
      continue;
    }
    if (!rankOf.has(to.pattern) || !rankOf.has(from.pattern)) continue;
    const problem = crossing(file, from, target, to);
    if (problem) problems.add(problem);
  }
}
for (const edges of perUnit.values()) for (const c of cycles(edges)) problems.add(`files import each other: ${c}`);

const shown = relative(process.cwd(), root) || '.';
if (problems.size) {
  console.error(`check-layers: ${problems.size} problem(s) under ${shown}/`);
  for (const p of problems) console.error(`  ${p}`);
  process.exit(1);
}
console.log(
  `check-layers: ${files.size} files in ${rankOf.size} units on ${rows.length} rows, every import points down`,
);
