// No function in src/ longer than MAX_LINES, counted from its first line to its last, comments and blank lines
// included; run by `npm run lint`, exits 1 listing each as file:line name (lines).
// Biome's noExcessiveLinesPerFunction counts only a body's lines of code, so it lets longer functions through;
// @babel/parser gives every function's span (declarations, methods, arrows and function expressions alike).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from '@babel/parser';

const MAX_LINES = 60;
const FUNCTION = new Set([
  'FunctionDeclaration',
  'FunctionExpression',
  'ArrowFunctionExpression',
  'ObjectMethod',
  'ClassMethod',
  'ClassPrivateMethod',
]);

function listFiles(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return listFiles(path);
    return name.endsWith('.ts') ? [path] : [];
  });
}

function nameOf(node, parent) {
  if (node.id?.name) return node.id.name;
  if (node.key?.name) return node.key.name;
  if (parent?.type === 'VariableDeclarator' && parent.id?.name) return parent.id.name;
  if ((parent?.type === 'ObjectProperty' || parent?.type === 'ClassProperty') && parent.key?.name) {
    return parent.key.name;
  }
  return '(anonymous)';
}

/** every function node under `node`, with its parent for naming */
function* functions(node, parent) {
  if (!node || typeof node.type !== 'string') return;
  if (FUNCTION.has(node.type)) yield { node, parent };
  for (const [key, value] of Object.entries(node)) {
    if (key === 'loc' || key === 'leadingComments' || key === 'trailingComments') continue;
    for (const child of Array.isArray(value) ? value : [value]) {
      if (child && typeof child === 'object') yield* functions(child, node);
    }
  }
}

const findings = [];
const files = listFiles('src');
for (const file of files) {
  const ast = parse(readFileSync(file, 'utf8'), { sourceType: 'module', plugins: ['typescript'] });
  for (const { node, parent } of functions(ast.program, undefined)) {
    const lines = node.loc.end.line - node.loc.start.line + 1;
    if (lines > MAX_LINES) findings.push(`${file}:${node.loc.start.line} ${nameOf(node, parent)} (${lines} lines)`);
  }
}
if (findings.length) {
  console.error(`check-functions: ${findings.length} function(s) over ${MAX_LINES} lines in src/`);
  for (const f of findings) console.error(`  ${f}`);
  process.exit(1);
}
console.log(`check-functions: ${files.length} files, every function within ${MAX_LINES} lines`);
