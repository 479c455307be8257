#!/usr/bin/env node
// The `qtsp` command. In a checkout it runs the TypeScript sources through tsx, so an edit needs no build and a
// stale dist/ never runs in their place. In the tree `npm test` compiles (scripts/test.mjs puts a copy of this
// file there, beside the emitted src/), it runs those modules.
// Where only the build is present (the container image ships dist/ without src/), it runs the build, as
// `node dist/cli/main.js` does.
import { existsSync } from 'node:fs';

const emitted = new URL('../src/cli/main.js', import.meta.url);
const sources = new URL('../src/cli/main.ts', import.meta.url);
if (existsSync(emitted)) {
  await import(emitted.href);
} else if (existsSync(sources)) {
  const { register } = await import('tsx/esm/api');
  register();
  await import(sources.href);
} else {
  await import(new URL('../dist/cli/main.js', import.meta.url).href);
}
