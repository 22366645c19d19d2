#!/usr/bin/env node
// The `warmpool` CLI. Sources are TypeScript run through tsx's loader, so there is no build
// step between a checkout and a running stack; the same loader is registered in every worker
// thread (see worker/engine/thread-bootstrap.mjs) and inherited by forked worker processes.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../scripts/cli.ts');
process.exitCode = await main(process.argv.slice(2));
