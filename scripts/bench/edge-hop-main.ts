/**
 * `npm run bench:edge-hop [-- --quick] [--model demo|cnn]`: the edge → region hop rows alone
 * (edge-hop.ts), ~20 s quick and ~90 s full on 2 cores where `warmpool bench` takes many
 * minutes: the bench's own Redis and S3, one built-in model published, the warmpool stack (a
 * `warmpool api` child and one worker), and workerd in front of it. The same rows `warmpool
 * bench` prints per model.
 */
import { parseArgs } from 'node:util';
import { builtInModels, publishBenchModel } from './bench-models.ts';
import { benchEdgeHop } from './edge-hop.ts';
import { runStandalone } from './standalone.ts';
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
  return runStandalone({
    name: 'bench:edge-hop',
    quick: values.quick,
    describe: `model ${model.name}`,
    rows: async (ctx, closers) => {
      const manifest = await publishBenchModel(ctx.registry, model);
      const stack = await startWarmpoolStack(ctx, manifest, 'child');
      closers.push(['warmpool stack', () => stack.stop()]);
      return benchEdgeHop(ctx, manifest, stack, benchSizes(values.quick).edge);
    },
  });
}

process.exitCode = await main();
