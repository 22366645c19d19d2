/**
 * A closed loop that times every request: `connections` keep-alive sockets, each sending its
 * next request as soon as the last answer's final byte came, each request timed send → last
 * byte with performance.now(). autocannon's histogram keeps whole milliseconds, so a hop that
 * costs a fraction of one would read as 0 or 1; here a sample keeps its microseconds and
 * stats.ts's summarizeMs takes the percentiles.
 */
import http from 'node:http';

export interface TimedRequest {
  /** Base URL, e.g. http://127.0.0.1:8080. */
  url: string;
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  /** Request i's body (POST only). */
  body?: (i: number) => string | Buffer;
}

export interface TimedLoopResult {
  /** Send → last byte, per request answered `ok`. */
  latenciesMs: number[];
  completed: number;
  /** Other answers, and transport errors. */
  failed: number;
  /** First send → last answer. */
  elapsedMs: number;
}

/** `amount` requests on `connections` connections; `ok` judges each answer's status (default: 200). */
export async function timedClosedLoop(
  request: TimedRequest,
  amount: number,
  connections: number,
  ok: (status: number) => boolean = (status) => status === 200,
): Promise<TimedLoopResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const url = new URL(request.path, request.url);
  const latenciesMs: number[] = [];
  let next = 0;
  let failed = 0;
  const loop = async () => {
    while (next < amount) {
      const i = next++;
      const t0 = performance.now();
      const status = await send(agent, url, request, i).catch(() => 0);
      if (ok(status)) latenciesMs.push(performance.now() - t0);
      else failed++;
    }
  };
  const started = performance.now();
  try {
    await Promise.all(Array.from({ length: Math.min(connections, amount) }, loop));
  } finally {
    agent.destroy();
  }
  return { latenciesMs, completed: latenciesMs.length, failed, elapsedMs: performance.now() - started };
}

/** One request; resolves with its status once the whole answer has been read. */
function send(agent: http.Agent, url: URL, request: TimedRequest, i: number): Promise<number> {
  const body = request.body?.(i);
  const headers = body === undefined ? request.headers : { ...request.headers, 'content-length': String(Buffer.byteLength(body)) };
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: request.method, agent, headers }, (res) => {
      res.on('data', () => {});
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}
