/**
 * `.warmpool/dev.env`: what another terminal in the folder needs to work with the running dev
 * stack, as KEY=VALUE lines the CLI loads for the variables that are unset there (scripts/cli.ts).
 *
 * It holds every configuration variable the stack runs with that is set, whether the stack chose
 * it (REDIS_URL, S3_ENDPOINT and its keys, API_KEYS, BULK_LOCATIONS, WEBHOOK_ALLOWED_PRIVATE_HOSTS)
 * or was given it (RATE_LIMIT_RPS=… npm start), so a command there sees the settings the stack's
 * API sees: `warmpool bulk run --webhook http://127.0.0.1:…` is accepted as the API accepts it.
 * Then where the stack listens: WARMPOOL_URL, DASHBOARD_URL, GRPC_URL. The listeners' own
 * settings (PORT, GRPC_PORT, …) are left out: they are that process's, and another process
 * given them would collide with it.
 *
 * "Every variable the config reads" is learned from loadConfig itself, by reading the
 * environment through a proxy that notes each name asked for, so this list cannot drift from
 * the config's.
 */
import { writeFileSync } from 'node:fs';
import { loadConfig } from '../../infra/kernel/config.ts';

/** A listener of the dev process itself, not a setting another process should take. */
const LISTENERS = new Set(['HOST', 'PORT', 'GRPC_PORT', 'METRICS_PORT', 'WORKER_HEALTH_PORT']);

export interface DevEndpoints {
  url: string;
  dashboardUrl: string;
  grpcUrl?: string;
}

/** The names loadConfig reads from `env` (some only when others are set: AWS_SECRET_ACCESS_KEY). */
export function configVariables(env: NodeJS.ProcessEnv): string[] {
  const read = new Set<string>();
  const recording = new Proxy(env, {
    get(target, name) {
      if (typeof name === 'string') read.add(name);
      return Reflect.get(target, name);
    },
  });
  loadConfig(recording);
  return [...read].filter((name) => /^[A-Z][A-Z0-9_]*$/.test(name));
}

/** dev.env's lines for `env` (the dev stack's, complete) and its endpoints. */
export function devEnvLines(env: NodeJS.ProcessEnv, endpoints: DevEndpoints): string[] {
  const settings = configVariables(env)
    .filter((name) => !LISTENERS.has(name) && env[name] !== undefined)
    .map((name) => `${name}=${env[name]}`);
  return [
    ...settings,
    `WARMPOOL_URL=${endpoints.url}`,
    `DASHBOARD_URL=${endpoints.dashboardUrl}`,
    ...(endpoints.grpcUrl ? [`GRPC_URL=${endpoints.grpcUrl}`] : []),
  ];
}

/** Writes dev.env; owner-only, since it holds the API keys and the S3 credentials. */
export function writeDevEnv(file: string, env: NodeJS.ProcessEnv, endpoints: DevEndpoints): void {
  writeFileSync(file, `${devEnvLines(env, endpoints).join('\n')}\n`, { mode: 0o600 });
}
