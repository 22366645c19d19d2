/**
 * The few Cloudflare Workers runtime types the gateway uses (Durable Objects, the execution
 * context), declared here rather than through @cloudflare/workers-types, whose globals would
 * clash with Node's in the one tsconfig the project type-checks with.
 */

export interface DurableObjectId {
  toString(): string;
}

export interface DurableObjectStub {
  fetch(input: string | Request, init?: RequestInit): Promise<Response>;
}

export interface DurableObjectNamespace {
  idFromName(name: string): DurableObjectId;
  get(id: DurableObjectId): DurableObjectStub;
}

export interface DurableObjectStorage {
  get<T>(key: string): Promise<T | undefined>;
  put(key: string, value: unknown): Promise<void>;
  put(entries: Record<string, unknown>): Promise<void>;
  delete(key: string | string[]): Promise<boolean | number>;
  list<T>(options: { prefix?: string; limit?: number; start?: string }): Promise<Map<string, T>>;
  getAlarm(): Promise<number | null>;
  setAlarm(at: number): Promise<void>;
  transaction<T>(fn: (txn: DurableObjectStorage) => Promise<T>): Promise<T>;
}

export interface DurableObjectState {
  storage: DurableObjectStorage;
  blockConcurrencyWhile<T>(fn: () => Promise<T>): Promise<T>;
}

export interface ExecutionContext {
  waitUntil(promise: Promise<unknown>): void;
  passThroughOnException(): void;
  props: unknown;
}
