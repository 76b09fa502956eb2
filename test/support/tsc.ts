/**
 * drizzle-orm's own declarations do not typecheck with `skipLibCheck: false`
 * (its gel and mysql modules import packages a PostgreSQL app does not have,
 * and some of its classes fail their own interfaces): an app with no
 * cronledger in it gets the same errors. What an app must not get is an
 * error from anything else, cronledger's declarations and its own code above
 * all. tsc prints paths relative to its working directory.
 */
export function errorsBeyondDrizzle(tscOutput: string): string[] {
  return tscOutput.split("\n").filter((line) => /error TS\d+/.test(line) && !/^(?:\.\.\/)*(?:[\w.-]+\/)*node_modules\/drizzle-orm[^/]*\//.test(line));
}
