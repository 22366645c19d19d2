import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** `<name>.json` (the value, indented) and `<name>.md` in `dir`, made if missing. */
export function writeReportFiles(dir: string, name: string, value: unknown, markdown: string): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, `${name}.json`), `${JSON.stringify(value, null, 2)}\n`);
  writeFileSync(path.join(dir, `${name}.md`), markdown);
}
