// Source hygiene that neither the formatter nor the linter checks, run by `npm run lint`; exits 1 listing each
// finding as file:line.
// - src/: no line over 120 characters (the formatter wraps code, not comments or strings);
// - src/: no comment quoting a measurement (timings in ms/us, ranges, "~0.4 s", "2.4x faster"): figures of one
//   machine on one day go stale in a comment; they belong in the bench's output and docs/performance.md;
// - everywhere: no reference to an issue number or to a document that is not in this repository.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const MAX = 120;
const CODE_DIRS = ['src', 'test', 'bench', 'scripts', 'fixtures', 'docs', 'docker', 'bin', '.ci'];
const CODE_FILES = ['README.md', 'openapi.yaml', 'package.json'];

function listFiles(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return listFiles(path);
    return /\.(ts|mjs|js|md|ya?ml|json)$|^(Dockerfile|run)$/.test(name) ? [path] : [];
  });
}

const ELSEWHERE = /\bissues? #?\d+|(?<![\w/])#\d{1,4}\b(?!['"\w])|\b(DESIGN|FIELD-NOTES|STYLE)\.md\b|FIELD-NOTES/i;
const MEASURED = [
  /\d(\.\d+)?\s*(-|–|to)\s*\d+(\.\d+)?\s*(ms|us|µs|%)(?!\w)/, // a measured range
  /~\s?\d+(\.\d+)?\s*(ms|us|µs|s)(?!\w)/, // an approximate timing
  /\d+(\.\d+)?\s*(->|→)\s*\d+(\.\d+)?\s*(ms|us|µs)(?!\w)/, // before -> after
  /\d\s*(us|µs)(?!\w)/, // microseconds are always a measurement here
  /\d\.\d+\s*ms(?!\w)/, // so are fractions of a millisecond
  /\d(\.\d+)?\s*x\s+(faster|slower|cheaper|the)\b/i,
];

/** the comment part of a line of TypeScript, or '' */
function commentOf(line) {
  const trimmed = line.trimStart();
  if (trimmed.startsWith('*') || trimmed.startsWith('/*') || trimmed.startsWith('//')) return trimmed;
  const at = line.indexOf(' // ');
  return at >= 0 ? line.slice(at) : '';
}

const findings = [];
const note = (file, i, what) => findings.push(`${relative(process.cwd(), file)}:${i + 1} ${what}`);
const files = [
  ...CODE_DIRS.flatMap((d) => {
    try {
      return listFiles(d);
    } catch {
      return [];
    }
  }),
  ...CODE_FILES,
];
for (const file of files) {
  if (file === 'scripts/check-source.mjs') continue; // its own patterns name what they look for
  const inSrc = file.startsWith(`src/`);
  readFileSync(file, 'utf8')
    .split('\n')
    .forEach((line, i) => {
      if (ELSEWHERE.test(line)) note(file, i, 'refers to an issue number or a document outside the repository');
      if (!inSrc) return;
      if (line.length > MAX) note(file, i, `is ${line.length} characters long (at most ${MAX})`);
      const comment = commentOf(line);
      if (MEASURED.some((re) => re.test(comment))) note(file, i, 'quotes a measurement in a comment');
    });
}
if (findings.length) {
  console.error(`check-source: ${findings.length} finding(s)`);
  for (const f of findings) console.error(`  ${f}`);
  process.exit(1);
}
console.log(
  `check-source: ${files.length} files, lines within ${MAX} in src/, no measurements in comments, no outside references`,
);
