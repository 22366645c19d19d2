/**
 * Entry of the inference thread. The sources are TypeScript run through tsx without a build
 * step, and a Worker cannot load a .ts file by itself. tsx's CommonJS hook loads ort-thread.ts
 * (and tensor-codec.ts) here: it only patches `require` in this thread, where tsx's ESM
 * `register()` would start a module-hooks thread and load esbuild into it first. That cost
 * 250–550 ms of every engine start on a loaded 2-core host, against about 1 ms for this hook;
 * it was most of a warm-cache cold start (docs/BENCHMARKS.md). ort-thread.ts has no top-level
 * await and no import.meta, so it loads the same either way.
 */
import { createRequire } from 'node:module';
import { register } from 'tsx/cjs/api';

register();
createRequire(import.meta.url)('./ort-thread.ts');
