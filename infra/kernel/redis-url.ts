/**
 * What REDIS_URL names: one node (`redis://…`) or a Redis Cluster
 * (`redis+cluster://[user:pass@]host:port,host:port[,…]`, `rediss+cluster://` for TLS). Pure
 * parsing, below config (which validates the variable) and the Redis client (which connects).
 */
const CLUSTER_URL = /^(rediss?)\+cluster:\/\/(?:([^@/]*)@)?([^/?#]+)\/?$/;

export interface ClusterAddress {
  nodes: Array<{ host: string; port: number }>;
  username?: string;
  password?: string;
  tls: boolean;
}

/** The nodes of a `redis+cluster://` URL; null for any other URL (a single node). */
export function parseClusterUrl(url: string): ClusterAddress | null {
  const match = CLUSTER_URL.exec(url.trim());
  if (!match) return null;
  const [, scheme, auth, hosts] = match as unknown as [string, string, string | undefined, string];
  const nodes = hosts.split(',').map((hostPort) => {
    const at = hostPort.lastIndexOf(':');
    const host = at > 0 ? hostPort.slice(0, at).replace(/^\[|\]$/g, '') : hostPort;
    const port = at > 0 ? Number(hostPort.slice(at + 1)) : 6379;
    if (host === '' || !Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`bad cluster node "${hostPort}" in REDIS_URL`);
    return { host, port };
  });
  const address: ClusterAddress = { nodes, tls: scheme === 'rediss' };
  if (auth !== undefined) {
    const colon = auth.indexOf(':');
    const user = decodeURIComponent(colon >= 0 ? auth.slice(0, colon) : auth);
    if (user !== '') address.username = user;
    if (colon >= 0) address.password = decodeURIComponent(auth.slice(colon + 1));
  }
  return address;
}

/** True for a `redis+cluster://` URL. */
export function isClusterUrl(url: string): boolean {
  return CLUSTER_URL.test(url.trim());
}
