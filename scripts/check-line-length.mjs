// Lines in src/ are at most 120 characters, comments and strings included (the formatter wraps code only).
// Run by `npm run lint`; exits 1 listing each longer line as file:line.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const MAX = 120;
const root = process.argv[2] ?? 'src';

function listFiles(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return listFiles(path);
    return /\.(ts|mjs|js)$/.test(name) ? [path] : [];
  });
}

const long = [];
for (const file of listFiles(root)) {
  readFileSync(file, 'utf8')
    .split('\n')
    .forEach((line, i) => {
      if (line.length > MAX) long.push(`${relative(process.cwd(), file)}:${i + 1} (${line.length})`);
    });
}
if (long.length) {
  console.error(`check-line-length: ${long.length} line(s) over ${MAX} characters`);
  for (const l of long) console.error(`  ${l}`);
  process.exit(1);
}
console.log(`check-line-length: no line over ${MAX} characters in ${root}/`);
