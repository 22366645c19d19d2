/**
 * `warmpool s3 ls|cp`: files in and out of S3, for the embedded store `warmpool dev` runs (whose
 * endpoint and keys are in `.warmpool/dev.env`) or any S3, with the same settings and client as
 * the registry and bulk runs (S3_ENDPOINT, AWS_* keys, path-style addressing): a newcomer puts a
 * bulk run's input in place without installing or configuring the aws CLI.
 *
 *   ls s3://bucket/[prefix] [-r]           this level (folders as PRE), or every object with -r
 *   cp FILE… s3://bucket/prefix/           upload each file to prefix + its name
 *   cp FILE s3://bucket/key                upload one file to that key
 *   cp -r DIR s3://bucket/prefix/          upload a directory's files, their paths kept below it
 *   cp s3://bucket/key FILE|DIR|-          download one object (- is stdout)
 *   cp -r s3://bucket/prefix/ DIR          download every object under the prefix
 *
 * Exit codes: 0 done; 1 S3 failed or an object is missing; 2 a usage error or a local file missing.
 * S3's own failures (no such bucket, credentials refused, endpoint down) go to cli-errors.ts.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Config } from '../../infra/kernel/config.ts';
import { InvalidInputError, NotFoundError } from '../../infra/kernel/errors.ts';
import type { ObjectInfo, ObjectStore } from '../../infra/registry/object-store.ts';
import { createS3BucketStores } from '../../infra/registry/s3-object-store.ts';
import { S3_CP, S3_LS } from './cli-options.ts';
import { parseCommand, usageError } from './cli-spec.ts';
import type { CliIo } from './deploy.ts';

export interface S3Io extends CliIo {
  /** Where a download to `-` goes. */
  stdout: NodeJS.WritableStream;
}

const processIo: S3Io = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
  stdout: process.stdout,
};

/** `s3://bucket/key`: the key may be empty (the whole bucket) or end with '/' (a folder). */
export interface S3Path {
  bucket: string;
  key: string;
}

export function parseS3Path(text: string): S3Path | undefined {
  const m = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:\/(.*))?$/.exec(text);
  if (!m) return undefined;
  return { bucket: m[1] as string, key: m[2] ?? '' };
}

const url = (p: S3Path, key = p.key) => `s3://${p.bucket}/${key}`;

export async function s3Main(sub: 'ls' | 'cp', args: string[], config: Config, io: S3Io = processIo): Promise<number> {
  const { s3 } = config;
  const stores = createS3BucketStores({
    region: s3.region,
    forcePathStyle: s3.forcePathStyle,
    ...(s3.endpoint ? { endpoint: s3.endpoint } : {}),
    ...(s3.credentials ? { credentials: s3.credentials } : {}),
  });
  try {
    return sub === 'ls' ? await ls(args, stores.forBucket, io) : await cp(args, stores.forBucket, io);
  } finally {
    stores.close();
  }
}

type StoreFor = (bucket: string) => ObjectStore;

async function ls(args: string[], storeFor: StoreFor, io: S3Io): Promise<number> {
  const { values, positionals } = parseCommand(S3_LS, args);
  const at = positionals[0] === undefined ? undefined : parseS3Path(positionals[0]);
  if (!at) throw usageError(S3_LS, `name an s3://bucket/prefix/ to list${positionals[0] ? ` (got '${positionals[0]}')` : ''}`);
  const objects = await storeFor(at.bucket).list(at.key);
  if (objects.length === 0) {
    io.err(`no objects under ${url(at)}\n`);
    return 0;
  }
  if (values.recursive) {
    for (const o of objects) io.out(`${objectLine(o, o.key)}\n`);
    return 0;
  }
  // This level only, as `aws s3 ls` shows it: what lies deeper is one PRE line per folder.
  const base = at.key.slice(0, at.key.lastIndexOf('/') + 1);
  const folders = new Set<string>();
  for (const o of objects) {
    const rest = o.key.slice(base.length);
    const slash = rest.indexOf('/', at.key.length - base.length);
    if (slash >= 0) folders.add(rest.slice(0, slash + 1));
  }
  for (const folder of folders) io.out(`${'PRE'.padStart(30)} ${folder}\n`);
  for (const o of objects) {
    const rest = o.key.slice(base.length);
    if (rest.indexOf('/', at.key.length - base.length) < 0) io.out(`${objectLine(o, rest)}\n`);
  }
  return 0;
}

/** `2024-06-01 12:00:00     1234 name`. */
function objectLine(o: ObjectInfo, name: string): string {
  const when = o.lastModified ? o.lastModified.toISOString().slice(0, 19).replace('T', ' ') : ''.padEnd(19);
  return `${when} ${String(o.sizeBytes).padStart(10)} ${name}`;
}

async function cp(args: string[], storeFor: StoreFor, io: S3Io): Promise<number> {
  const { values, positionals } = parseCommand(S3_CP, args);
  const recursive = values.recursive === true;
  if (positionals.length < 2) throw usageError(S3_CP, 'name what to copy and where: FILE… s3://bucket/prefix/, or s3://bucket/key FILE');
  const sources = positionals.slice(0, -1);
  const target = positionals.at(-1) as string;
  const to = parseS3Path(target);
  if (to && sources.every((s) => !s.startsWith('s3://'))) return upload(sources, to, recursive, storeFor(to.bucket), io);
  const from = sources.length === 1 ? parseS3Path(sources[0] as string) : undefined;
  if (from && !target.startsWith('s3://')) return download(from, target, recursive, storeFor(from.bucket), io);
  throw usageError(S3_CP, 'copy local files to one s3:// destination, or one s3:// source to a local path');
}

async function upload(sources: string[], to: S3Path, recursive: boolean, store: ObjectStore, io: S3Io): Promise<number> {
  const files: Array<{ file: string; key: string }> = [];
  const intoFolder = to.key === '' || to.key.endsWith('/');
  for (const source of sources) {
    const stat = await fs.stat(source).catch(() => undefined);
    if (!stat) throw new InvalidInputError('no_such_file', `no such file: ${source}`);
    if (stat.isDirectory()) {
      if (!recursive) throw usageError(S3_CP, `${source} is a directory: add --recursive to copy its files`);
      if (!intoFolder) throw usageError(S3_CP, `a directory goes into a folder: end the destination with / (${url(to)}/)`);
      for (const file of await filesUnder(source))
        files.push({ file, key: to.key + path.relative(source, file).split(path.sep).join('/') });
      continue;
    }
    if (!intoFolder && sources.length > 1)
      throw usageError(S3_CP, `several files go into a folder: end the destination with / (${url(to)}/)`);
    files.push({ file: source, key: intoFolder ? to.key + path.basename(source) : to.key });
  }
  for (const { file, key } of files) {
    const size = (await fs.stat(file)).size;
    const contentType = CONTENT_TYPES[path.extname(file).toLowerCase()];
    await store.put(key, createReadStream(file), contentType ? { contentType } : undefined);
    io.out(`upload: ${file} to ${url(to, key)} (${bytes(size)})\n`);
  }
  return 0;
}

async function download(from: S3Path, target: string, recursive: boolean, store: ObjectStore, io: S3Io): Promise<number> {
  const say = target === '-' ? io.err : io.out;
  if (recursive || from.key === '' || from.key.endsWith('/')) {
    if (target === '-') throw usageError(S3_CP, 'several objects cannot go to stdout: name a directory');
    const prefix = from.key === '' || from.key.endsWith('/') ? from.key : `${from.key}/`;
    const objects = await store.list(prefix);
    if (objects.length === 0) throw new NotFoundError('object_not_found', `no objects under ${url(from, prefix)}`);
    for (const o of objects) {
      const file = path.join(target, ...o.key.slice(prefix.length).split('/'));
      await save(store, { ...from, key: o.key }, file);
      say(`download: ${url(from, o.key)} to ${file} (${bytes(o.sizeBytes)})\n`);
    }
    return 0;
  }
  if (target === '-') {
    await pipeline(await object(store, from), io.stdout, { end: false });
    return 0;
  }
  const isDir = target.endsWith('/') || target.endsWith(path.sep) || (await fs.stat(target).catch(() => undefined))?.isDirectory();
  const file = isDir ? path.join(target, path.posix.basename(from.key)) : target;
  const size = await save(store, from, file);
  say(`download: ${url(from)} to ${file} (${bytes(size)})\n`);
  return 0;
}

async function object(store: ObjectStore, at: S3Path): Promise<Readable> {
  const body = await store.get(at.key);
  if (!body)
    throw new NotFoundError(
      'object_not_found',
      `no such object: ${url(at)} (\`warmpool s3 ls ${url(at, at.key.slice(0, at.key.lastIndexOf('/') + 1))}\` lists what is there)`,
    );
  return body;
}

/** The object into `file` (its folders made); returns the bytes written. */
async function save(store: ObjectStore, at: S3Path, file: string): Promise<number> {
  const body = await object(store, at);
  await fs.mkdir(path.dirname(file), { recursive: true });
  const sink = createWriteStream(file);
  await pipeline(body, sink);
  return sink.bytesWritten;
}

/** Every file below `dir`, in name order (symbolic links to folders are not followed). */
async function filesUnder(dir: string): Promise<string[]> {
  const found: string[] = [];
  for (const entry of (await fs.readdir(dir, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name))) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) found.push(...(await filesUnder(full)));
    else if (entry.isFile()) found.push(full);
  }
  return found;
}

const CONTENT_TYPES: Record<string, string> = {
  '.jsonl': 'application/x-ndjson',
  '.ndjson': 'application/x-ndjson',
  '.json': 'application/json',
  '.csv': 'text/csv',
  '.onnx': 'application/octet-stream',
};

function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}
