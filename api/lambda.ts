/**
 * The API on AWS Lambda: the same hono app, through hono's Lambda adapter. Config is read and
 * connections are opened on the first invocation, not at import (a cold start that fails on
 * config reports it in the invocation's error, naming the variable), then reused while the
 * execution environment lives.
 */
import { handle } from 'hono/aws-lambda';
import { loadConfig } from '../infra/kernel/config.ts';
import { createLogger } from '../infra/kernel/log.ts';
import { type ApiRuntime, createApiRuntime, STARTUP_REDIS_WAIT_MS } from './main.ts';

type LambdaHandler = ReturnType<typeof handle>;
let handler: Promise<LambdaHandler> | undefined;
let runtime: ApiRuntime | undefined;

export const lambdaHandler = async (...args: Parameters<LambdaHandler>): Promise<Awaited<ReturnType<LambdaHandler>>> => {
  // A start that failed (bad config) is retried by the next invocation, which reports it again.
  handler ??= start().catch((err: unknown) => {
    handler = undefined;
    throw err;
  });
  return (await handler)(...args);
};

async function start(): Promise<LambdaHandler> {
  const config = loadConfig(process.env);
  const started = createApiRuntime(config, createLogger(config.logLevel, { role: 'api-lambda' }));
  runtime = started;
  // The first invocation of a cold environment would otherwise meet a connection still opening.
  await started.connected(STARTUP_REDIS_WAIT_MS);
  return handle(started.app);
}

/**
 * Closes the connections the first invocation opened; the next invocation opens new ones. Lambda
 * never calls it (an execution environment is frozen, then discarded): a test or an embedding
 * that must not leave connections behind does.
 */
export async function closeLambdaRuntime(): Promise<void> {
  await handler?.catch(() => {}); // a start under way finishes first, so its connections are closed too
  const open = runtime;
  handler = undefined;
  runtime = undefined;
  await open?.close();
}
