/**
 * Queue entries (infra/contracts/entry.ts) written straight into BullMQ, for tests of the readers
 * of what a worker leaves behind (events streams, returnvalues, output rows) without the API's
 * writer or a model: an entry's data with knobs saying how each member ends, the `run` that
 * test/support/entry-worker.ts's miniature intake calls to end them so, and the API's real cancel
 * of a member while its entry is queued.
 */
import { randomBytes } from 'node:crypto';
import { type Queue, UnrecoverableError } from 'bullmq';
import { ENTRY_ID_PREFIX, type EntryData, type EntryMember } from '../../infra/contracts/entry.ts';
import type { JobView } from '../../infra/contracts/job.ts';
import { packTensors } from '../../infra/contracts/packed-tensors.ts';
import { systemClock } from '../../infra/kernel/clock.ts';
import { createJobIndex } from '../../infra/queue/job-index.ts';
import { leaseQueues } from '../../infra/queue/queue-cache.ts';
import { createTombstones } from '../../infra/queue/tombstones.ts';
import type { RedisClient } from '../../infra/redis/client.ts';
import { entryInputsKey } from '../../infra/redis/keys.ts';
import type { MemberFn } from './entry-worker.ts';

const RETENTION_S = 3600;

export interface EntryKnobs {
  /** Every member's run throws this (`code: message`) as a transient error: the whole entry fails. */
  fail?: string;
  /** Members that fail alone (a bisected bad input), by id. */
  errors?: Record<string, { code: string; message: string }>;
  /** The entry's first attempt throws this as a transient error; the retry runs. */
  failFirst?: string;
}

export type TestEntryData = EntryData & { knobs?: EntryKnobs };

export type TestMember = Pick<EntryMember, 'id'> & Partial<Omit<EntryMember, 'id'>>;

export interface AddedEntry {
  id: string;
  data: TestEntryData;
  /** Lets workers take an entry added `held` (a no-op otherwise). */
  release(): Promise<void>;
}

/** A new entry id (`ent_…`). */
export function entryId(): string {
  return ENTRY_ID_PREFIX + randomBytes(15).toString('base64url');
}

/** An entry of `members` (1 row each unless given) for `model` version `version`, with one FP32 input `x`. */
export function testEntry(opts: {
  tenant?: string;
  model: string;
  version: string;
  members: TestMember[];
  knobs?: EntryKnobs;
}): TestEntryData {
  const now = Date.now();
  const members = opts.members.map((m) => ({ rows: 1, submittedAt: now, ...m }));
  const rows = members.reduce((n, m) => n + m.rows, 0);
  const data: TestEntryData = {
    entry: 1,
    tenant: opts.tenant ?? 'tenant-a',
    model: opts.model,
    version: opts.version,
    submittedAt: now,
    members,
    inputs: [{ name: 'x', datatype: 'FP32', shape: [rows, 1], offset: 0, length: 4 * rows }],
  };
  if (opts.knobs) data.knobs = opts.knobs;
  return data;
}

/**
 * Adds entry `data` as the API's writer does (its packed inputs, then the BullMQ job). `held`:
 * into BullMQ's delayed set, which no worker takes from until `release()` and the API's cancel
 * reaches as it does the wait list, so members can be canceled while the entry is queued.
 */
export async function addEntry(
  redis: RedisClient,
  prefix: string,
  queue: Queue,
  data: TestEntryData,
  opts: { held?: boolean; attempts?: number } = {},
): Promise<AddedEntry> {
  const id = entryId();
  const rows = data.members.reduce((n, m) => n + m.rows, 0);
  const { bytes } = packTensors([{ name: 'x', datatype: 'FP32', shape: [rows, 1], data: new Float32Array(rows) }]);
  await redis.set(entryInputsKey(prefix, queue.name, id), bytes, 'EX', RETENTION_S);
  const job = await queue.add('entry', data, { jobId: id, attempts: opts.attempts ?? 1, ...(opts.held ? { delay: 3_600_000 } : {}) });
  return { id, data, release: async () => (opts.held ? job.promote() : undefined) };
}

/** Member i's output rows hold 10·i + r (r its row): each member's rows are told apart by value. */
export function memberOutput(index: number, rows: number): number[] {
  return Array.from({ length: rows }, (_, r) => 10 * index + r);
}

/** The `run` for test/support/entry-worker.ts that ends members as their entry's knobs say; else output `y` = memberOutput. */
export const knobbedRun: MemberFn = ({ entry, member, attemptsMade }) => {
  const knobs = (entry as TestEntryData).knobs;
  if (knobs?.fail) throw new Error(knobs.fail);
  if (knobs?.failFirst && attemptsMade === 0) throw new Error(knobs.failFirst);
  const error = knobs?.errors?.[member.id];
  if (error) throw new UnrecoverableError(`${error.code}: ${error.message}`);
  const values = memberOutput(entry.members.indexOf(member), member.rows);
  return [{ name: 'y', datatype: 'FP32', shape: [member.rows, 1], data: Float32Array.from(values) }];
};

/** The API's cancel of member `memberId` of queued entry `entry` (infra/queue/tombstones.ts): its tombstone, or null. */
export async function cancelQueuedMember(
  redis: RedisClient,
  prefix: string,
  queue: string,
  entry: Pick<AddedEntry, 'id' | 'data'>,
  memberId: string,
): Promise<JobView | null> {
  const member = entry.data.members.find((m) => m.id === memberId);
  if (!member) throw new Error(`entry ${entry.id} has no member ${memberId}`);
  const queues = leaseQueues(redis, prefix);
  try {
    const tombstones = createTombstones({
      redis,
      prefix,
      retentionS: RETENTION_S,
      clock: systemClock,
      index: createJobIndex(redis, { prefix, retentionS: RETENTION_S }),
      queues,
      onError: (err) => {
        throw err;
      },
    });
    const { tenant, model, version } = entry.data;
    const view: JobView = { id: memberId, tenant, model, version, status: 'queued', createdAt: member.submittedAt, attemptsMade: 0 };
    const at = { view, queue, entryId: entry.id, members: entry.data.members.length };
    return await tombstones.bury(at, 'canceled', { code: 'canceled', message: 'canceled by the client' });
  } finally {
    await queues.release();
  }
}
