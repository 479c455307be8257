/**
 * Statements of a fixed shape, compiled by Kysely once per store instead of once per call: building and
 * compiling the statements of a signDoc cost the event loop more than handing over the writes themselves.
 *
 * prepare(build) calls `build` once with a placeholder in place of each argument; Kysely builds and compiles the
 * query exactly as it would with values (a placeholder is an opaque value to it: it becomes a parameter), and
 * the SQL text is kept together with which argument each of Kysely's parameters is. A call then only fills the
 * parameters: the SQL and the parameter order remain Kysely's own. Constants written in `build` (a literal
 * state, `is null`) stay part of the SQL as Kysely writes them.
 *
 * A shape that depends on a count (the rows of a multi-row insert, the members of an IN list) is prepared once
 * per count: preparedByCount.
 *
 * Kysely has no prepared-statement API of its own for this (its compile() needs a built query), hence this
 * small layer; the store contract suites (test/store/) run every statement on SQLite and PostgreSQL.
 */
import type { Compilable } from 'kysely';
import type { Statement } from './group-commit.ts';

const SLOT = Symbol('prepared statement argument');

interface Placeholder {
  readonly [SLOT]: string;
}

const isPlaceholder = (value: unknown): value is Placeholder =>
  typeof value === 'object' && value !== null && SLOT in value;

/** the arguments as `build` sees them: one placeholder per name, typed as the value it stands for */
export type Slots<A> = { readonly [K in keyof A]: A[K] };

/** A statement compiled once; each call gives the SQL with this call's parameters. */
export type Prepared<A> = (args: A) => Statement;

export function prepare<A extends Record<string, unknown>>(build: (slots: Slots<A>) => Compilable): Prepared<A> {
  let compiled: { sql: string; parameters: readonly (Placeholder | { readonly constant: unknown })[] } | undefined;
  return (args) => {
    if (!compiled) {
      const slots = new Proxy({}, { get: (_target, name) => ({ [SLOT]: String(name) }) }) as Slots<A>;
      const query = build(slots).compile();
      compiled = { sql: query.sql, parameters: query.parameters.map((p) => (isPlaceholder(p) ? p : { constant: p })) };
      const used = new Set(compiled.parameters.flatMap((p) => (isPlaceholder(p) ? [p[SLOT]] : [])));
      const missing = Object.keys(args).filter((name) => !used.has(name));
      // an argument Kysely did not turn into a parameter would be silently ignored: refuse the shape instead
      if (missing.length > 0)
        throw new Error(
          `prepared statement: argument(s) ${missing.join(', ')} did not become parameters of ${query.sql}`,
        );
    }
    return {
      sql: compiled.sql,
      parameters: compiled.parameters.map((p) => (isPlaceholder(p) ? args[p[SLOT]] : p.constant)),
    };
  };
}

/**
 * prepare() per count, for shapes with `count` rows or list members: `build(count)` returns the builder for that
 * count. Counts above `maxCount` are compiled on each call (a bound on what is kept: one shape per count).
 */
export function preparedByCount<A extends Record<string, unknown>>(
  build: (count: number) => (slots: Slots<A>) => Compilable,
  maxCount = 128,
): (count: number) => Prepared<A> {
  const byCount = new Map<number, Prepared<A>>();
  return (count) => {
    let prepared = byCount.get(count);
    if (!prepared) {
      prepared = prepare(build(count));
      if (count <= maxCount) byCount.set(count, prepared);
    }
    return prepared;
  };
}

/** `count` argument names `${prefix}0` .. for a row or list member each */
export const indexed = (prefix: string, count: number): string[] =>
  Array.from({ length: count }, (_, i) => `${prefix}${i}`);

/** a row of `names` whose values are the slots of the same names (an insert's values) */
export function columns<A, K extends keyof A & string>(slots: Slots<A>, names: readonly K[]): { [P in K]: A[P] } {
  return Object.fromEntries(names.map((name) => [name, slots[name]])) as { [P in K]: A[P] };
}
