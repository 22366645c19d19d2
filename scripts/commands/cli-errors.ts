/**
 * The CLI's failures as a user reads them: one line saying what went wrong, and a hint where
 * there is one, never a stack trace (cli.ts prints that only under --debug). Expected failures
 * are recognised by their shape, whichever layer threw them:
 *
 * - a usage error or a bad configuration value (exit 2);
 * - Redis or S3 unreachable (ECONNREFUSED and kin, ioredis giving up), named by endpoint and by
 *   where the endpoint came from; from `.warmpool/dev.env`, the file is said to be stale;
 * - an S3 bucket that does not exist, credentials S3 refuses, access denied;
 * - a model, version, deployment or run that does not exist (exit 1).
 *
 * Anything else is unexpected: its message, and how to see the stack.
 */
import { closestName } from '../../infra/kernel/closest-name.ts';
import { ConfigError, InvalidInputError, NotFoundError } from '../../infra/kernel/errors.ts';
import { UsageError } from './cli-spec.ts';

/** A service a command could not reach before it started (cli.ts's Redis check) or while it ran. */
export class ServiceUnreachableError extends Error {
  override name = 'ServiceUnreachableError';
  constructor(
    readonly service: Service,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

type Service = 'Redis' | 'S3';

/** Where a setting came from: the environment, `.warmpool/dev.env`, or the default. */
export type SettingSource = 'env' | 'dev-env' | 'default';

export interface FailureContext {
  /** The command's words: `models list`. */
  command: string;
  redis: { url: string; source: SettingSource };
  /** Unset endpoint: AWS's own. */
  s3: { endpoint?: string; bucket: string; source: SettingSource; credentialsSource: SettingSource };
  devEnvFile: string;
  /** When `.warmpool/dev.env` was written (ms since the epoch), if it was read. */
  devEnvWrittenAt?: number;
  now: number;
}

export interface Failure {
  lines: string[];
  exitCode: number;
}

const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'ECONNRESET']);
const REDIS_GAVE_UP = /max retries per request|Connection is closed|None of startup nodes is available|Cluster isn't ready/i;
const CREDENTIALS_REFUSED = new Set([
  'InvalidAccessKeyId',
  'SignatureDoesNotMatch',
  'InvalidToken',
  'ExpiredToken',
  'CredentialsProviderError',
]);

/** The failure in the user's words; undefined when it is not one the CLI expects. */
export function describeFailure(err: unknown, ctx: FailureContext): Failure | undefined {
  const say = (message: string) => `warmpool ${ctx.command}: ${message}`;
  if (err instanceof UsageError) return { lines: [err.message], exitCode: 2 };
  if (err instanceof ConfigError) return { lines: [`warmpool: configuration error: ${err.message}`], exitCode: 2 };
  if (err instanceof InvalidInputError) return { lines: [say(err.message)], exitCode: 2 };
  if (err instanceof NotFoundError) return { lines: [say(err.message), ...notFoundHint(err.code)], exitCode: 1 };
  const s3 = s3Failure(err, ctx);
  if (s3) return { lines: [say(s3[0] as string), ...s3.slice(1)], exitCode: 1 };
  const service = unreachableService(err, ctx);
  if (service) return { lines: unreachable(service, ctx).map((l, i) => (i === 0 ? say(l) : l)), exitCode: 1 };
  return undefined;
}

/** For an unexpected error: its message, and where its stack is. */
export function unexpectedFailure(err: unknown, command: string, debug: boolean): Failure {
  const message = err instanceof Error ? `${err.name === 'Error' ? '' : `${err.name}: `}${err.message}` : String(err);
  const hint = '(unexpected: run it again with --debug, or WARMPOOL_DEBUG=1, for the stack trace)';
  return { lines: [`warmpool ${command}: ${message}`, ...(debug ? [] : [hint])], exitCode: 1 };
}

/**
 * A model_not_found, deployment_not_found or pool_not_found for `name` with the name it most likely meant, when
 * one of `names` (what is published, or deployed) is close — the API's did-you-mean
 * (infra/kernel/closest-name.ts): `no model named demo-scorr in the registry; did you mean
 * "demo-scorer"?`. Any other error, one with nothing close, or one whose names cannot be listed
 * (S3 down: that failure is not the user's question) is returned as it is.
 */
export async function withNearestName(err: unknown, name: string, names: () => Promise<readonly string[]>): Promise<unknown> {
  // The API's use cases turn a registry's not-found into a 422 of the same code (deployments.ts).
  const refusal = err instanceof NotFoundError || err instanceof InvalidInputError ? err : undefined;
  if (!refusal || !NAMED_NOT_FOUND.includes(refusal.code)) return err;
  const known = await names().catch(() => []);
  const near = closestName(
    name,
    known.filter((n) => n !== name),
  );
  if (near === undefined) return err;
  const message = `${refusal.message}; did you mean "${near}"?`;
  return refusal instanceof NotFoundError
    ? new NotFoundError(refusal.code, message, { cause: err })
    : new InvalidInputError(refusal.code, message, { status: refusal.status, cause: err });
}

const NAMED_NOT_FOUND = ['model_not_found', 'deployment_not_found', 'pool_not_found'];

/** What to run to see what exists, for a NotFoundError's code. */
export function notFoundHint(code: string): string[] {
  if (code === 'model_not_found' || code === 'version_not_found')
    return ['`warmpool models list` shows what is published; `warmpool models publish` adds a model'];
  if (code === 'deployment_not_found') return ['`warmpool deployments` lists what is deployed; `warmpool deploy M` deploys a model'];
  if (code === 'pool_not_found') return ['`warmpool pool list` lists the shared pools; `warmpool pool set NAME --max N` creates one'];
  return [];
}

/** The errors in the chain: the error and its causes (an AggregateError's errors too). */
function chain(err: unknown): Error[] {
  const out: Error[] = [];
  const visit = (e: unknown, depth: number) => {
    if (!(e instanceof Error) || depth > 6 || out.includes(e)) return;
    out.push(e);
    if (e instanceof AggregateError) for (const inner of e.errors) visit(inner, depth + 1);
    visit(e.cause, depth + 1);
  };
  visit(err, 0);
  return out;
}

/** Which service could not be reached, if that is what happened. */
function unreachableService(err: unknown, ctx: FailureContext): Service | undefined {
  const errors = chain(err);
  const named = errors.find((e): e is ServiceUnreachableError => e instanceof ServiceUnreachableError);
  if (named) return named.service;
  const network = errors.find((e) => UNREACHABLE_CODES.has(String((e as NodeJS.ErrnoException).code)));
  const redisGaveUp = errors.some((e) => e.name === 'MaxRetriesPerRequestError' || REDIS_GAVE_UP.test(e.message));
  if (!network && !redisGaveUp) return undefined;
  // By address first: the port says which endpoint refused.
  const port = (network as { port?: number } | undefined)?.port;
  if (port !== undefined && ctx.s3.endpoint && portOf(ctx.s3.endpoint) === port) return 'S3';
  if (port !== undefined && portOf(ctx.redis.url) === port) return 'Redis';
  if (errors.some(isS3Error)) return 'S3';
  return 'Redis';
}

/** S3 errors: the SDK's carry `$metadata`; the object store's wrapper says "S3 …". */
function isS3Error(e: Error): boolean {
  return '$metadata' in e || e.name === 'BucketUnavailableError' || /^S3 /.test(e.message);
}

function portOf(url: string): number | undefined {
  try {
    const u = new URL(url.replace(/^rediss?\+cluster:/, 'redis:').split(',')[0] as string);
    if (u.port) return Number(u.port);
    return { 'redis:': 6379, 'rediss:': 6379, 'http:': 80, 'https:': 443 }[u.protocol];
  } catch {
    return undefined;
  }
}

function unreachable(service: Service, ctx: FailureContext): string[] {
  const redis = service === 'Redis';
  const variable = redis ? 'REDIS_URL' : 'S3_ENDPOINT';
  const source = redis ? ctx.redis.source : ctx.s3.source;
  const where = redis ? ctx.redis.url : (ctx.s3.endpoint ?? 'AWS S3');
  if (source === 'dev-env') {
    const age = ctx.devEnvWrittenAt === undefined ? '' : ` ${ago(ctx.now - ctx.devEnvWrittenAt)}`;
    return [
      `cannot reach ${service} at ${where} (from ${ctx.devEnvFile}): is \`warmpool dev\` (npm start) running in this folder?`,
      `${ctx.devEnvFile} is stale: the \`warmpool dev\` that wrote it${age} no longer answers there. Start \`warmpool dev\` (npm start) again, which rewrites it, or delete the file and set ${variable}.`,
    ];
  }
  if (source === 'env') return [`cannot reach ${service} at ${where} (${variable}): is ${service} running there?`];
  return [
    `cannot reach ${service} at ${where} (the default: ${variable} is unset and there is no ${ctx.devEnvFile} here)`,
    `start \`warmpool dev\` (npm start) in this folder for a local stack, or set ${variable}.`,
  ];
}

/** A bucket that does not exist, credentials refused, access denied: what S3 said, and what to change. */
function s3Failure(err: unknown, ctx: FailureContext): string[] | undefined {
  const errors = chain(err);
  const code = errors.map(s3Code).find((c) => c !== undefined);
  if (code === undefined) return undefined;
  const bucket = errors.map((e) => (e as { bucket?: unknown }).bucket).find((b): b is string => typeof b === 'string') ?? ctx.s3.bucket;
  const at = ctx.s3.endpoint ? ` at ${ctx.s3.endpoint}` : '';
  const from = (source: SettingSource, what: string) =>
    source === 'dev-env'
      ? `${what} from ${ctx.devEnvFile}`
      : source === 'env'
        ? `${what} from the environment`
        : `${what} from the AWS SDK's default chain`;
  if (code === 'NoSuchBucket') {
    return [
      `S3 bucket "${bucket}" does not exist${at}`,
      bucket === ctx.s3.bucket
        ? `create it, or set S3_BUCKET to a bucket that exists (S3_BUCKET is "${ctx.s3.bucket}")`
        : `create it, or name a bucket that exists (\`warmpool s3 ls s3://${ctx.s3.bucket}/\` lists S3_BUCKET's)`,
    ];
  }
  if (CREDENTIALS_REFUSED.has(code)) {
    return [
      `S3${at} refused the credentials (${code})`,
      `check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (${from(ctx.s3.credentialsSource, 'keys')}); the embedded server of \`warmpool dev\` takes the ones in ${ctx.devEnvFile}`,
    ];
  }
  return [
    `S3${at} denied access to bucket "${bucket}" (${code})`,
    `these credentials (${from(ctx.s3.credentialsSource, 'keys')}) may not use it`,
  ];
}

function s3Code(e: Error): string | undefined {
  const code = (e as { Code?: string }).Code ?? e.name;
  if (code === 'NoSuchBucket' || code === 'AccessDenied' || code === 'AllAccessDisabled' || CREDENTIALS_REFUSED.has(code)) return code;
  return undefined;
}

function ago(ms: number): string {
  const minutes = Math.round(ms / 60_000);
  if (minutes < 1) return 'less than a minute ago';
  if (minutes < 120) return `${minutes} min ago`;
  const hours = Math.round(minutes / 60);
  return hours < 48 ? `${hours} h ago` : `${Math.round(hours / 24)} days ago`;
}
