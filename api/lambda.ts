/**
 * The API on AWS Lambda: the same hono app, through hono's Lambda adapter. Config is read and
 * connections are opened on the first invocation, not at import (a cold start that fails on
 * config reports it in the invocation's error, naming the variable), then reused while the
 * execution environment lives.
 */
import { handle } from 'hono/aws-lambda';
import { loadConfig } from '../infra/config.ts';
import { createLogger } from '../infra/log.ts';
import { createApiRuntime } from './main.ts';

type LambdaHandler = ReturnType<typeof handle>;
let handler: LambdaHandler | undefined;

export const lambdaHandler: LambdaHandler = (event, context) => {
  if (!handler) {
    const config = loadConfig(process.env);
    handler = handle(createApiRuntime(config, createLogger(config.logLevel, { role: 'api-lambda' })).app);
  }
  return handler(event, context);
};
