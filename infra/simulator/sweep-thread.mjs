/**
 * Entry of a sweep thread (sweep.ts). The sources are TypeScript run through tsx without a build
 * step, and a Worker cannot load a .ts file by itself: register tsx in this thread first, then
 * load the thread's code.
 */
import { register } from 'tsx/esm/api';

register();
await import('./sweep-thread.ts');
