export { benchMain } from './bench/main.ts';
