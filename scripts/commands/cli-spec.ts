/**
 * What a `warmpool` command takes, written once: its options (node:util parseArgs' own option
 * objects, each with a help line and a placeholder for its value), its positionals, a summary and
 * examples. The parser and the help text both read this one table, so `--help` cannot describe a
 * flag the parser refuses or miss one it takes (cli-options.ts holds the tables).
 *
 * Errors from the parser become a `UsageError` whose message names the command and its help:
 * `warmpool bulk run: unknown option '--x'` / `see 'warmpool bulk run --help'` (exit 2); an
 * unknown `--flag` close to one the command takes says which (`did you mean '--standby'?`, the
 * API's did-you-mean, infra/kernel/closest-name.ts).
 */
import { parseArgs } from 'node:util';
import { closestName } from '../../infra/kernel/closest-name.ts';

export interface OptionSpec {
  type: 'string' | 'boolean';
  short?: string;
  multiple?: boolean;
  /**
   * Takes every following word up to the next `--flag` (`--sweep standby=0,1 headroom=0.2`), which
   * parseArgs cannot express: such words are split off before parsing and returned as a list.
   */
  words?: boolean;
  /** The value's placeholder in the help: `--chunk-rows N`. */
  value?: string;
  help: string;
}

export type OptionTable = Record<string, OptionSpec>;

export interface CommandSpec<O extends OptionTable = OptionTable> {
  /** The words after `warmpool`: `bulk run`. */
  path: string;
  summary: string;
  /** Positionals and required flags as the usage line shows them: `--model M --input s3://… --output s3://…`. */
  usage: string;
  /** How many positionals it takes at most (0: none; extra ones are a usage error). */
  maxPositionals: number;
  options: O;
  /** Paragraphs after the options: defaults, exit codes, what it needs running. */
  notes?: readonly string[];
  examples?: readonly string[];
}

/** Options every command takes; cli.ts acts on them before any command runs. */
export const GLOBAL_OPTIONS = {
  help: { type: 'boolean', short: 'h', help: 'show this help and exit (starts nothing)' },
  debug: { type: 'boolean', help: 'print the stack trace of an unexpected error (also WARMPOOL_DEBUG=1)' },
} as const satisfies OptionTable;

/** A mistake in the command line: printed as it is (it names the command and its help), exit 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

type ParseConfig<O extends OptionTable> = { args: string[]; options: O; allowPositionals: true; strict: true };
type ParsedArgs<O extends OptionTable> = ReturnType<typeof parseArgs<ParseConfig<O>>>;
type WordValues<O extends OptionTable> = { [K in keyof O as O[K]['words'] extends true ? K : never]?: string[] };

/** The command line parsed by the command's table; a usage error names the command and its help. */
export function parseCommand<O extends OptionTable>(
  spec: CommandSpec<O>,
  args: readonly string[],
): { values: Omit<ParsedArgs<O>['values'], keyof WordValues<O>> & WordValues<O>; positionals: string[] } {
  const { rest, words } = splitWords(spec.options, args);
  let parsed: ParsedArgs<O>;
  try {
    parsed = parseArgs({ args: rest, options: spec.options, allowPositionals: true, strict: true } as ParseConfig<O>);
  } catch (err) {
    throw usageError(spec, parseArgsMessage(spec, err));
  }
  if (parsed.positionals.length > spec.maxPositionals) {
    const extra = parsed.positionals.slice(spec.maxPositionals).join(' ');
    throw usageError(spec, spec.maxPositionals === 0 ? `takes no arguments (got '${extra}')` : `unexpected argument '${extra}'`);
  }
  return { values: { ...parsed.values, ...words } as never, positionals: parsed.positionals };
}

/** `warmpool <path>: <message>` and where the help is. */
export function usageError(spec: Pick<CommandSpec, 'path'>, message: string): UsageError {
  return new UsageError(`warmpool ${spec.path}: ${message}\nsee 'warmpool ${spec.path} --help'`);
}

/** parseArgs' messages in the CLI's words: `unknown option '--x'`; others lower-cased as they are. */
export function parseArgsMessage(spec: Pick<CommandSpec, 'options'>, err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const unknown = /^Unknown option '([^']+)'/.exec(err.message);
  if (unknown) return unknownOption(spec, unknown[1] as string);
  const first = err.message.split('\n')[0] ?? err.message;
  return first.charAt(0).toLowerCase() + first.slice(1);
}

/**
 * `unknown option '--stanby'; did you mean '--standby'?` where a long option is close to one the
 * command takes (its own or a global one). A short `-x` gets no guess: one letter is close to
 * too much.
 */
export function unknownOption(spec: Pick<CommandSpec, 'options'>, option: string): string {
  const near = option.startsWith('--')
    ? closestName(option.slice(2), [...Object.keys(spec.options), ...Object.keys(GLOBAL_OPTIONS)])
    : undefined;
  return `unknown option '${option}'${near === undefined ? '' : `; did you mean '--${near}'?`}`;
}

/** Words of `words` options split off the arguments, so parseArgs sees only what it can parse. */
function splitWords(options: OptionTable, args: readonly string[]): { rest: string[]; words: Record<string, string[]> } {
  const rest: string[] = [];
  const words: Record<string, string[]> = {};
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    const name = arg.startsWith('--') ? arg.slice(2) : undefined;
    if (arg === '--') {
      rest.push(...args.slice(i));
      break;
    }
    if (name === undefined || !options[name]?.words) {
      rest.push(arg);
      continue;
    }
    const taken = words[name] ?? [];
    words[name] = taken;
    while (i + 1 < args.length && !(args[i + 1] as string).startsWith('--')) taken.push(args[++i] as string);
  }
  return { rest, words };
}

/** Whether the arguments ask for help (`--help` or `-h` anywhere before a `--`). */
export function wantsHelp(args: readonly string[]): boolean {
  for (const arg of args) {
    if (arg === '--') return false;
    if (arg === '--help' || arg === '-h') return true;
  }
  return false;
}

/** The help page: summary, usage, every option from the table, notes, examples. */
export function formatHelp(spec: CommandSpec): string {
  const rows = [...Object.entries(spec.options), ...Object.entries(GLOBAL_OPTIONS)].map(
    ([name, o]) => [flagText(name, o), o.help] as const,
  );
  const width = Math.min(34, Math.max(...rows.map(([flag]) => flag.length)));
  const lines = [
    `warmpool ${spec.path}: ${spec.summary}`,
    '',
    `Usage: warmpool ${spec.path}${spec.usage ? ` ${spec.usage}` : ''}`,
    '',
    'Options:',
  ];
  for (const [flag, help] of rows) {
    lines.push(flag.length > width ? `  ${flag}\n  ${' '.repeat(width)}  ${help}` : `  ${flag.padEnd(width)}  ${help}`);
  }
  for (const note of spec.notes ?? []) lines.push('', ...wrap(note, 100));
  if (spec.examples?.length) lines.push('', 'Examples:', ...spec.examples.map((e) => `  ${e}`));
  return `${lines.join('\n')}\n`;
}

/** A paragraph in lines of at most `width` columns (a longer word keeps its own line). */
function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(line);
  return lines;
}

function flagText(name: string, o: OptionSpec): string {
  const short = o.short ? `-${o.short}, ` : '';
  const value = o.type === 'string' ? ` ${o.value ?? 'VALUE'}${o.words ? ' …' : ''}` : '';
  const repeat = o.multiple ? ' (repeatable)' : '';
  return `${short}--${name}${value}${repeat}`;
}

/** `warmpool models --help`: the group's subcommands, one line each. */
export function formatGroupHelp(group: { path: string; summary: string; subcommands: readonly CommandSpec[] }): string {
  const width = Math.max(...group.subcommands.map((s) => s.path.length));
  return [
    `warmpool ${group.path}: ${group.summary}`,
    '',
    ...group.subcommands.map((s) => `  warmpool ${s.path.padEnd(width)}  ${s.summary}`),
    '',
    `'warmpool ${group.path} <subcommand> --help' for its options.`,
    '',
  ].join('\n');
}

/** `warmpool --help`: every command with its summary. */
export function formatOverview(commands: readonly CommandSpec[]): string {
  const width = Math.max(...commands.map((c) => c.path.length));
  return [
    'warmpool: autoscaling ONNX inference workers behind a queue',
    '',
    'Usage: warmpool <command> [options]',
    '',
    'Commands:',
    ...commands.map((c) => `  ${c.path.padEnd(width)}  ${c.summary}`),
    '',
    "'warmpool <command> --help' (or 'warmpool help <command>') shows a command's options; it never starts anything.",
    '--debug (or WARMPOOL_DEBUG=1) prints the stack trace of an unexpected error.',
    '',
    'Configuration comes from environment variables (see README), validated at start. Every command but dev, bench',
    'and simulate first reads .warmpool/dev.env (written by `warmpool dev`) for variables that are unset.',
    '',
  ].join('\n');
}
