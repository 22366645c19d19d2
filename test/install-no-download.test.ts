/**
 * `npm ci` downloads nothing from outside the registry: onnxruntime-node's install script would
 * fetch the CUDA execution provider (hundreds of MB, from NuGet) on linux/x64. Two things keep it
 * from running, for the npm versions Node 20 meets: `.npmrc`'s `onnxruntime-node-install=skip`
 * (npm 10 passes it to the script as npm_config_onnxruntime_node_install; npm 11 warns that it is
 * an unknown project key, and will stop passing it in its next major) and, from npm 11.19, npm's
 * own default of running no dependency's install script that package.json's `allowScripts` does
 * not approve. This test fails if either stops holding and the libraries appeared.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '..');
const CUDA_EP = path.join(ROOT, 'node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime_providers_cuda.so');
/** Someone asked for the CUDA libraries on this machine (README's GPU section): then they are meant to be there. */
const askedForCuda = /cuda/i.test(process.env.ONNXRUNTIME_NODE_INSTALL ?? '') || /cuda/i.test(process.env.EXECUTION_PROVIDERS ?? '');

describe('install', () => {
  it('keeps onnxruntime-node from downloading its CUDA libraries at npm ci', () => {
    expect(readFileSync(path.join(ROOT, '.npmrc'), 'utf8')).toMatch(/^onnxruntime-node-install=skip$/m);
    const manifest = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { allowScripts?: Record<string, unknown> };
    // Approving it would let npm ≥ 11.19 run the download the moment npm stops passing .npmrc's key.
    expect(
      Object.keys(manifest.allowScripts ?? {}).filter((k) => k.startsWith('onnxruntime-node') && manifest.allowScripts?.[k] !== false),
    ).toEqual([]);
    if (process.platform === 'linux' && process.arch === 'x64' && !askedForCuda) expect(existsSync(CUDA_EP)).toBe(false);
  });
});
