/**
 * Entry of the inference thread. The sources are TypeScript run through tsx without a build
 * step, and a Worker cannot load a .ts file by itself: register tsx in this thread first, then
 * load the thread's code (ort-thread.ts).
 */
import { register } from 'tsx/esm/api';

register();
await import('./ort-thread.ts');
