/** Reads an SSE response (GET /v1/jobs/{id}/events) into events and heartbeat comments as they arrive. */
export function sseReader(res: Response) {
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  return {
    /** The next block: an event `{event, data}` or a comment `{comment}`; null when the stream ended. */
    async next(): Promise<{ event?: string; data?: Record<string, unknown>; comment?: string } | null> {
      for (;;) {
        const end = buffer.indexOf('\n\n');
        if (end >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (block.startsWith(':')) return { comment: block.slice(1).trim() };
          const event = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          return { event, data: data === undefined ? undefined : (JSON.parse(data) as Record<string, unknown>) };
        }
        const { done, value } = await reader.read();
        if (done) return null;
        buffer += decoder.decode(value, { stream: true });
      }
    },
    /** The next event, skipping heartbeats. */
    async nextEvent() {
      for (;;) {
        const block = await this.next();
        if (block === null || block.event !== undefined) return block;
      }
    },
    cancel: () => reader.cancel(),
  };
}
