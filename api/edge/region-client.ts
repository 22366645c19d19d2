/**
 * The one way the gateway reaches the regional API: `fetch` to REGION_URL, nothing kept open
 * across requests (a Worker may not), bodies and answers streamed through untouched. It says
 * when the region could not be reached (no connection, a reset before the answer, no answer
 * headers within the timeout, or a 502/504 from whatever fronts it) so a caller can buffer or
 * answer 503, and it never retries on its own: only a request carrying an Idempotency-Key may be
 * sent twice, and the caller knows whether it does.
 */

/** Request headers that describe the client's hop, not the request: never forwarded. */
const HOP_HEADERS = ['host', 'connection', 'keep-alive', 'transfer-encoding', 'te', 'upgrade', 'proxy-connection', 'content-length'];

export interface RegionRequest {
  method: string;
  /** Path and query, e.g. `/v1/jobs/abc?binary_data_output=true`. */
  path: string;
  headers: Headers;
  body?: Uint8Array | ReadableStream<Uint8Array> | null;
  signal?: AbortSignal;
}

export type RegionAnswer = { kind: 'answered'; response: Response } | { kind: 'unreachable'; reason: string };

export interface RegionClient {
  send(request: RegionRequest): Promise<RegionAnswer>;
  /** GET with the gateway's own key (the catalog); throws when unreachable or not 200. */
  getJson<T>(path: string): Promise<T>;
}

export interface RegionClientOptions {
  regionUrl: string;
  /** The key of the gateway's own reads. */
  regionKey: string;
  /** How long to wait for the answer's headers (a stream's body may then take as long as it takes). */
  timeoutMs: number;
  fetch?: typeof fetch;
}

export function forwardedHeaders(from: Headers): Headers {
  const headers = new Headers(from);
  for (const name of HOP_HEADERS) headers.delete(name);
  return headers;
}

export function createRegionClient(options: RegionClientOptions): RegionClient {
  const doFetch = options.fetch ?? fetch;
  const send = async (request: RegionRequest): Promise<RegionAnswer> => {
    const timeout = AbortSignal.timeout(options.timeoutMs);
    const signal = request.signal ? AbortSignal.any([request.signal, timeout]) : timeout;
    const hasBody = request.body !== undefined && request.body !== null && request.method !== 'GET' && request.method !== 'HEAD';
    try {
      const response = await doFetch(`${options.regionUrl}${request.path}`, {
        method: request.method,
        headers: request.headers,
        ...(hasBody ? { body: request.body as BodyInit } : {}),
        signal,
        redirect: 'manual',
      });
      if (response.status === 502 || response.status === 504) {
        await response.body?.cancel().catch(() => undefined);
        return { kind: 'unreachable', reason: `the region's front answered ${response.status}` };
      }
      return { kind: 'answered', response };
    } catch (err) {
      if (request.signal?.aborted) throw err;
      const reason = timeout.aborted ? `no answer within ${options.timeoutMs} ms` : err instanceof Error ? err.message : String(err);
      return { kind: 'unreachable', reason };
    }
  };
  return {
    send,
    async getJson<T>(path: string): Promise<T> {
      const headers = new Headers({ authorization: `Bearer ${options.regionKey}`, accept: 'application/json' });
      const answer = await send({ method: 'GET', path, headers });
      if (answer.kind === 'unreachable') throw new Error(`region unreachable: ${answer.reason}`);
      if (answer.response.status !== 200) {
        await answer.response.body?.cancel().catch(() => undefined);
        throw new Error(`region answered ${answer.response.status} to GET ${path}`);
      }
      return (await answer.response.json()) as T;
    },
  };
}
