/**
 * What a tenant is told about a failed webhook attempt: a category, never the error itself
 * (issue 20). `ECONNREFUSED 127.0.0.1:80` against `ETIMEDOUT 10.0.0.7:5432` in a delivery
 * record is a port scanner the tenant drives through the dispatcher; names, addresses and
 * ports stay in the dispatcher's log (api/webhooks/dispatcher.ts).
 *
 *   blocked_address     the policy refused every address (api/webhooks/address-policy.ts)
 *   timeout             no answer within WEBHOOK_TIMEOUT_MS
 *   dns                 the name did not resolve
 *   connection_refused  nothing listens there
 *   connection_reset    the connection was cut mid-way
 *   unreachable         no route to the host or network
 *   tls                 the TLS handshake or certificate failed
 *   invalid_response    what came back was not HTTP
 *   http_<status>       the receiver answered, but not 2xx (the status is in the attempt too)
 *   connection_error    anything else
 */

/** Thrown by an attempt when the address policy refuses the host or what it resolves to. */
export class BlockedAddressError extends Error {}

export const ATTEMPT_ERROR_CATEGORIES = [
  'blocked_address',
  'timeout',
  'dns',
  'connection_refused',
  'connection_reset',
  'unreachable',
  'tls',
  'invalid_response',
  'connection_error',
] as const;

const KNOWN = new Set<string>(ATTEMPT_ERROR_CATEGORIES);

/** The category of an error thrown by one attempt. */
export function attemptErrorCategory(err: unknown): string {
  if (err instanceof BlockedAddressError) return 'blocked_address';
  if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')) return 'timeout';
  const code = err instanceof Error ? (err as NodeJS.ErrnoException).code : undefined;
  return categoryOfCode(code ?? '') ?? (err instanceof Error && /resolved to no address/.test(err.message) ? 'dns' : 'connection_error');
}

/** The category of a receiver's non-2xx answer. */
export function httpErrorCategory(status: number): string {
  return `http_${status}`;
}

/**
 * A stored attempt error as the tenant may see it. Records written before categories held the
 * raw text (`ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:80`, `blocked: host … resolves to …`);
 * they are kept for a week, so reading maps them too.
 */
export function publicAttemptError(stored: string): string {
  if (KNOWN.has(stored) || /^http_\d{3}$/.test(stored)) return stored;
  if (stored.startsWith('blocked')) return 'blocked_address';
  return categoryOfCode(/^([A-Z][A-Z0-9_]+):/.exec(stored)?.[1] ?? '') ?? 'connection_error';
}

function categoryOfCode(code: string): string | undefined {
  if (code === 'ECONNREFUSED') return 'connection_refused';
  if (code === 'ECONNRESET' || code === 'EPIPE' || code === 'ECONNABORTED') return 'connection_reset';
  if (code === 'ETIMEDOUT' || code === 'ESOCKETTIMEDOUT') return 'timeout';
  if (code === 'ENOTFOUND' || code.startsWith('EAI_')) return 'dns';
  if (['EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'ENETDOWN', 'EADDRNOTAVAIL'].includes(code)) return 'unreachable';
  if (/^(ERR_TLS_|ERR_SSL_|ERR_OSSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|HOSTNAME_MISMATCH|EPROTO$)/.test(code)) return 'tls';
  if (code.startsWith('HPE_')) return 'invalid_response';
  return undefined;
}
