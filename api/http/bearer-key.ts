/**
 * The key in `Authorization: Bearer <key>`: pure, so the region (auth.ts, the gRPC service) and
 * the edge gateway (api/edge/edge-auth.ts) read the header the same way.
 */

/** The key in an `authorization` value of the form `Bearer <key>` (HTTP header or gRPC metadata); undefined otherwise. */
export function bearerKey(authorization: string | undefined): string | undefined {
  return /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '')?.[1];
}
