/** One sample of the Prometheus text exposition format. */
export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface Exposition {
  readonly types: ReadonlyMap<string, string>;
  readonly samples: readonly Sample[];
  /** Sum of the samples named `name` whose labels include `labels`. */
  value(name: string, labels?: Readonly<Record<string, string>>): number;
}

const METRIC_NAME = "[a-zA-Z_:][a-zA-Z0-9_:]*";
const SAMPLE_LINE = new RegExp(`^(${METRIC_NAME})(?:\\{(.*)\\})?\\s+(\\S+)(?:\\s+-?\\d+)?$`);
const LABEL = /\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(?:,|$)/y;
const TYPES = new Set(["counter", "gauge", "histogram", "summary", "untyped"]);

function parseLabels(text: string, line: string): Record<string, string> {
  const labels: Record<string, string> = {};
  LABEL.lastIndex = 0;
  while (LABEL.lastIndex < text.length) {
    const match = LABEL.exec(text);
    if (!match?.[1]) throw new Error(`bad labels in line: ${line}`);
    labels[match[1]] = (match[2] ?? "").replace(/\\(.)/g, (_, char: string) => (char === "n" ? "\n" : char));
  }
  return labels;
}

function parseValue(text: string, line: string): number {
  if (text === "+Inf") return Number.POSITIVE_INFINITY;
  if (text === "-Inf") return Number.NEGATIVE_INFINITY;
  if (text === "NaN") return Number.NaN;
  const value = Number(text);
  if (text === "" || Number.isNaN(value)) throw new Error(`bad value in line: ${line}`);
  return value;
}

/**
 * A strict reader of the text format (version 0.0.4): every line must be
 * a HELP, a TYPE (declared once, before its samples) or a sample, so a
 * malformed exposition fails the test instead of being skipped.
 */
export function parseExposition(text: string): Exposition {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "") continue;
    if (line.startsWith("# HELP ")) {
      if (!new RegExp(`^# HELP ${METRIC_NAME} .*$`).test(line)) throw new Error(`bad HELP line: ${line}`);
      continue;
    }
    if (line.startsWith("# TYPE ")) {
      const [, , name, type] = line.split(" ");
      if (!name || !type || !TYPES.has(type)) throw new Error(`bad TYPE line: ${line}`);
      if (types.has(name)) throw new Error(`TYPE declared twice for ${name}`);
      types.set(name, type);
      continue;
    }
    if (line.startsWith("#")) continue;
    const match = SAMPLE_LINE.exec(line);
    if (!match?.[1] || match[3] === undefined) throw new Error(`bad sample line: ${line}`);
    const name = match[1];
    const family = [...types.keys()].find((declared) => name.startsWith(declared) && /^(?:|_bucket|_sum|_count)$/.test(name.slice(declared.length)));
    if (family === undefined) throw new Error(`sample ${name} has no TYPE line before it`);
    samples.push({ name, labels: parseLabels(match[2] ?? "", line), value: parseValue(match[3], line) });
  }
  return {
    types,
    samples,
    value(name, labels = {}) {
      return samples
        .filter((sample) => sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value))
        .reduce((sum, sample) => sum + sample.value, 0);
    },
  };
}
