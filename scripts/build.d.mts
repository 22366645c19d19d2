// Types for scripts/build.mjs (plain JavaScript, so bin/warmpool.mjs can load it without a loader).
export declare const ROOT: string;
export declare const DIST: string;
export declare const STAMP: string;
export declare const TARGET: string;
export declare const ENTRIES: Record<string, string>;
export declare const THREAD_ENTRIES: Record<string, string>;
export declare function staleReason(root?: string): string | undefined;
export declare function sourceRelativeUrls(
  esbuild: typeof import('esbuild'),
  source: string,
  rel: string,
  loader: 'ts' | 'js',
  tsconfigRaw?: string,
): Promise<string>;
export declare function buildDist(options?: { root?: string; quiet?: boolean }): Promise<string[]>;
