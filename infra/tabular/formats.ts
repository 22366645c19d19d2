/**
 * The format of a bulk input object: the run's when it names one, else the key's extension
 * (`.jsonl`/`.ndjson`/`.json`, `.csv`, `.parquet`/`.pq`); undefined when neither tells.
 */
import type { BulkFormat } from '../contracts/bulk.ts';

export function formatOf(key: string, given?: BulkFormat): BulkFormat | undefined {
  if (given) return given;
  if (/\.(jsonl|ndjson|json)$/i.test(key)) return 'jsonl';
  if (/\.csv$/i.test(key)) return 'csv';
  if (/\.(parquet|pq)$/i.test(key)) return 'parquet';
  return undefined;
}

/** What the part writer emits for each format (the part's Content-Type). */
export const PART_CONTENT_TYPES: Record<BulkFormat, string> = {
  jsonl: 'application/x-ndjson',
  csv: 'text/csv',
  parquet: 'application/vnd.apache.parquet',
};
