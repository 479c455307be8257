#!/usr/bin/env node
// The `qtsp` command. In a checkout it runs the TypeScript sources through tsx, so an edit needs no build and a
// stale dist/ never runs in their place. Where only the build is present (the container image ships dist/
// without src/), it runs the build, as `node dist/cli/main.js` does.
import { existsSync } from 'node:fs';

const sources = new URL('../src/cli/main.ts', import.meta.url);
if (existsSync(sources)) {
  const { register } = await import('tsx/esm/api');
  register();
  await import(sources.href);
} else {
  await import(new URL('../dist/cli/main.js', import.meta.url).href);
}
