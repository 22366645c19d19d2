/**
 * `npm run bench:edge-hop [-- --quick] [--model demo|cnn]`: the edge → region hop rows alone
 * (edge-hop.ts), ~20 s quick and ~90 s full on 2 cores where `warmpool bench` takes many
 * minutes: the bench's own Redis and S3, one built-in model published, the warmpool stack (a
 * `warmpool api` child and one worker), and workerd in front of it. The same rows `warmpool
 * bench` prints per model.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { type Closer, closeAll } from '../../infra/kernel/lifecycle.ts';
import { builtInModels, publishBenchModel } from './bench-models.ts';
import { benchEdgeHop } from './edge-hop.ts';
import { formatTable } from './report.ts';
import { startBenchContext } from './services.ts';
import { benchSizes } from './suite.ts';
import { startWarmpoolStack } from './warmpool-stack.ts';

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: { quick: { type: 'boolean', default: false }, model: { type: 'string', default: 'demo' } },
    strict: true,
  });
  const model = builtInModels().find((m) => m.name === values.model);
  if (!model) {
    process.stderr.write(`bench:edge-hop: --model is one of ${builtInModels().map((m) => m.name)} (got '${values.model}')\n`);
    return 2;
  }
  const out = (line: string) => process.stdout.write(`${line}\n`);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'warmpool-edge-hop-'));
  const closers: Closer[] = [];
  const started = Date.now();
  try {
    const ctx = await startBenchContext(dir, values.quick, out, closers);
    out(`bench:edge-hop${values.quick ? ' --quick' : ''}: ${os.availableParallelism()} cpus, node ${process.version}, model ${model.name}`);
    const manifest = await publishBenchModel(ctx.registry, model);
    const stack = await startWarmpoolStack(ctx, manifest, 'child');
    closers.push(['warmpool stack', () => stack.stop()]);
    const rows = await benchEdgeHop(ctx, manifest, stack, benchSizes(values.quick).edge);
    out('');
    out(formatTable(rows));
    out(`took ${Math.round((Date.now() - started) / 1000)} s`);
    return rows.every((r) => Number.isFinite(r.value)) ? 0 : 1;
  } finally {
    await closeAll([...closers].reverse()).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}

process.exitCode = await main();
