import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { OverloadedError } from '../../infra/kernel/errors.ts';
import { readTraceFile } from '../../infra/simulator/index.ts';
import { DEPLOY, resolveCommand, SIMULATE } from './cli-options.ts';
import { parseCommand } from './cli-spec.ts';

describe('help that says what the server does', () => {
  it('deploy --backlog-max names the status and code a full backlog is refused with', () => {
    // The refusal is the API's OverloadedError (api/use-cases/deployment-admission.ts).
    const refused = new OverloadedError('backlog_full', 'full', 1);
    expect(DEPLOY.options['backlog-max'].help).toContain(`${refused.status} ${refused.code}`);
    expect(DEPLOY.options['backlog-max'].help).not.toMatch(/429/);
  });

  // The shared traces the examples name, where README's commands find them: beside the checkout.
  const ROOT = path.resolve(import.meta.dirname, '../..');
  const shared = existsSync(path.join(ROOT, '../shared/traces'));

  it.skipIf(!shared)("simulate --help's examples name traces that exist and columns they have", () => {
    const traced = (SIMULATE.examples ?? []).filter((e) => e.includes('--trace ../shared/'));
    expect(traced.length).toBeGreaterThan(0);
    for (const example of traced) {
      const flag = (name: string) => new RegExp(`--${name} (\\S+)`).exec(example)?.[1];
      const file = path.join(ROOT, flag('trace') as string);
      expect(existsSync(file), example).toBe(true);
      expect(() => readTraceFile(file, { timeColumn: flag('time-col'), countColumn: flag('count-col') }), example).not.toThrow();
    }
    for (const example of (SIMULATE.examples ?? []).filter((e) => e.includes('--traces '))) {
      expect(existsSync(path.join(ROOT, /--traces (\S+)/.exec(example)?.[1] as string)), example).toBe(true);
    }
  });
});

describe('did you mean', () => {
  const usage = (args: string[]) => {
    try {
      parseCommand(DEPLOY, args);
    } catch (err) {
      return (err as Error).message;
    }
    return undefined;
  };

  it('names the flag an unknown --flag most likely meant', () => {
    expect(usage(['m', '--stanby', '1'])).toMatch(/^warmpool deploy: unknown option '--stanby'; did you mean '--standby'\?\n/);
    expect(usage(['m', '--backlog', '5'])).toMatch(/did you mean '--backlog-max'\?/);
    // The options every command takes are candidates too.
    expect(usage(['m', '--debgu'])).toMatch(/did you mean '--debug'\?/);
  });

  it('guesses nothing for a flag close to none, or a one-letter flag', () => {
    expect(usage(['m', '--replicas', '3'])).toBe("warmpool deploy: unknown option '--replicas'\nsee 'warmpool deploy --help'");
    expect(usage(['m', '-x'])).toBe("warmpool deploy: unknown option '-x'\nsee 'warmpool deploy --help'");
  });

  it('names the command or subcommand an unknown one most likely meant', () => {
    expect(resolveCommand(['simulat'])).toEqual({ kind: 'unknown', message: 'unknown command "simulat"; did you mean "simulate"?' });
    expect(resolveCommand(['models', 'shw'])).toEqual({
      kind: 'unknown',
      message: 'unknown models subcommand "shw" (publish, list, show); did you mean "show"?',
    });
    expect(resolveCommand(['frobnicate'])).toEqual({ kind: 'unknown', message: 'unknown command "frobnicate"' });
  });
});
