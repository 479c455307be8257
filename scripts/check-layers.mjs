// Dependencies point one way (issue 8): no two folders under src/ may import each other, directly or through
// other folders, and the files inside one folder may not import each other in a circle. Run by `npm test`
// before the tests; exits 1 naming each cycle it finds. Counts every relative module specifier: `import`,
// `import type`, `export ... from` and `import()`. Folder = first path segment under src/ (the
// files directly in src/ (service.ts at the top, errors.ts at the bottom) each count as their own unit), so
// sub-folders such as sandbox/as count as part of sandbox.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

const root = resolve(process.argv[2] ?? 'src');

function listFiles(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return listFiles(path);
    return name.endsWith('.ts') ? [path] : [];
  });
}

const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(?\s*)['"](\.{1,2}\/[^'"]+)['"]/g;

/** file (relative to src/) -> files it imports (relative to src/) */
function importGraph() {
  const graph = new Map();
  for (const file of listFiles(root)) {
    const targets = new Set();
    for (const [, spec] of readFileSync(file, 'utf8').matchAll(SPECIFIER)) {
      const target = resolve(dirname(file), spec.replace(/\.js$/, '.ts'));
      if (target.startsWith(root + sep)) targets.add(relative(root, target));
    }
    graph.set(relative(root, file), targets);
  }
  return graph;
}

const folderOf = (file) => file.split(sep)[0];

/** One cycle per strongly connected component with more than one node (Tarjan), each as a path a -> b -> a. */
function cycles(edges) {
  const index = new Map(),
    low = new Map(),
    stack = [],
    onStack = new Set(),
    found = [];
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
    if (component.length > 1) found.push(describe(edges, new Set(component)));
  };
  for (const v of edges.keys()) if (!index.has(v)) visit(v);
  return found;
}

/** A shortest walk from the first member back to itself inside the component, and who else is in it. */
function describe(edges, members) {
  const path = pathThrough(edges, members);
  const others = [...members].filter((m) => !path.includes(m)).sort();
  const walk = path.join(' -> ');
  return others.length ? `${walk} (also in this cycle: ${others.join(', ')})` : walk;
}

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

const files = importGraph();
const folders = new Map();
const perFolder = new Map();
for (const [file, targets] of files) {
  const from = folderOf(file);
  if (!folders.has(from)) folders.set(from, new Set());
  for (const target of targets) {
    const to = folderOf(target);
    if (to !== from) {
      folders.get(from).add(to);
      continue;
    }
    if (!perFolder.has(from)) perFolder.set(from, new Map());
    const edges = perFolder.get(from);
    if (!edges.has(file)) edges.set(file, new Set());
    edges.get(file).add(target);
  }
}

const problems = [
  ...cycles(folders).map((c) => `folders import each other: ${c}`),
  ...[...perFolder.values()].flatMap((edges) => cycles(edges).map((c) => `files import each other: ${c}`)),
];
if (problems.length) {
  console.error(`check-layers: ${problems.length} import cycle(s) under ${relative(process.cwd(), root) || '.'}/`);
  for (const p of problems) console.error(`  ${p}`);
  process.exit(1);
}
console.log(`check-layers: ${files.size} files in ${folders.size} folders, no import cycle`);
