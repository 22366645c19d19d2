/** Runs `run` over `items`, at most `limit` at once, results in the items' order; `onDone` hears each as it finishes. */
export async function inParallel<T, R>(
  items: readonly T[],
  limit: number,
  run: (item: T, index: number) => Promise<R>,
  onDone?: (result: R, done: number, total: number) => void,
): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  let done = 0;
  await Promise.all(
    Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, async () => {
      for (let i = next++; i < items.length; i = next++) {
        out[i] = await run(items[i] as T, i);
        onDone?.(out[i] as R, ++done, items.length);
      }
    }),
  );
  return out;
}
